"""Fixtures shared by modules: runs of the fine-tune that several checks read (tests using one carry its
`xdist_group`, so that `--dist loadgroup` gives them one worker and the run happens once)."""

import importlib.util

import pytest

from harness.scenarios import record

SAMPLE_PROMPTS = '["[S1] Hello there.", {text: "Guten Tag.", language: de, speaker: S2}]'


@pytest.fixture(scope="session")
def two_process_run(tmp_path_factory):
    """Two processes through the launcher: 4 steps logged each, checkpoints at 2 and 4, evaluation at 4, and (where
    soundfile is installed) two samples every 2 steps. Returns the output folder and the launch's result."""
    from tests.demo_utils import run_demo, tiny_codec  # not at import: the `noaccelerate` env loads this file too

    root = tmp_path_factory.mktemp("two_processes")
    settings = ["num_processes=2", "max_steps=4", "logging_steps=1", "save_steps=2", "eval_steps=4"]
    if importlib.util.find_spec("soundfile"):
        settings += [f"codec={tiny_codec(root / 'codec')}", f"sample_prompts={SAMPLE_PROMPTS}", "sample_every=2"]
        settings.append("sample_max_frames=20")
    return root / "run", run_demo(root / "run", *settings)


@pytest.fixture
def accelerator():
    """A one-process CPU Accelerator, for unit tests of the fine-tuner's modules; accelerate's singletons are reset
    after, as `run_main` leaves them."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState

    from tests.testing_utils import accelerate_environment_cleared

    with accelerate_environment_cleared():
        try:
            yield Accelerator(cpu=True)
        finally:
            AcceleratorState._reset_state(True)
            GradientState._reset_state()


def pytest_sessionfinish(session, exitstatus):
    """The env's suite result for `harness.matrix_report` (on the controller: it sees every worker's results)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if hasattr(session.config, "workerinput") or reporter is None:
        return
    stats = reporter.stats
    counts = {key: len(stats.get(key, [])) for key in ("passed", "failed", "error", "xfailed", "xpassed", "skipped")}
    record("suite", exitstatus=int(exitstatus), **counts)
