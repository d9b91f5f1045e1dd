"""A `Trainer` under `accelerate launch --use_deepspeed` and `--use_fsdp` on CPU processes, after an `Accelerator`.

Each case launches the program twice: with the user's `Accelerator` made before the arguments, and without one
(nothing to reset). The arguments keep the user's state (its `PartialState` is theirs); the `Trainer` resets it, with
one line on every rank: accelerate cannot take its DeepSpeed plugin over a DeepSpeed state, and an FSDP plugin cannot
be shown equal. Either way the `Trainer` trains as it does without the user's `Accelerator`, loss for loss.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import transformers

from tests.testing_utils import PATCHED, RESET_WARNING, SCRIPTS, free_ports, launch_env

require_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed (tox's patched and unpatched envs build it)"
)
ORDERS = ("accelerator_first", "trainer_only")


def launch(tmp_path, flags, num_processes, env=None) -> dict[str, list[dict]]:
    """{order: [rank 0's report, ...]} of `launched_trainer.py` under `accelerate launch FLAGS`."""
    reports = {}
    for order in ORDERS:
        out = tmp_path / order
        out.mkdir()
        cmd = [sys.executable, "-m", "accelerate.commands.launch", *flags, "--num_processes", str(num_processes)]
        cmd += ["--num_machines", "1", "--dynamo_backend", "no", "--main_process_port", str(free_ports()[0])]
        cmd += [str(SCRIPTS / "launched_trainer.py"), str(out), order]
        result = subprocess.run(cmd, env=launch_env(**(env or {})), capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr[-3000:]
        reports[order] = [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(num_processes)]
    return reports


def assert_one_line_per_launch(report, reason):
    """The `Trainer`'s reset is said once, by rank 0 (the published release resets without a word)."""
    if PATCHED and report["rank"] == 0:
        (line,) = report["logged"]
        assert RESET_WARNING in line and reason in line and "it cannot be reused" in line, line
    else:
        assert report["logged"] == [], report


def assert_trains_as_without_a_user_accelerator(reports, kind, precision):
    for first, alone in zip(*(reports[order] for order in ORDERS), strict=True):
        assert first["trained"] == alone["trained"], (first, alone)
    if not alone["trained"].startswith("3 steps/"):  # e.g. 4.42's Trainer refuses FSDP2 by itself; equal is all
        pytest.skip(f"transformers {transformers.__version__} does not train this launch: {alone['trained'][:120]}")
    assert f"/{kind}/{precision}/loss " in alone["trained"], alone


@require_deepspeed
@pytest.mark.skipif(os.environ.get("DS_BUILD_SHM_COMM") != "1", reason="an env that does not build DeepSpeed's op")
def test_deepspeed_launches_need_no_compiler():
    # tox's envs build DeepSpeed's CPU ops when they install it: no launch compiles them (two compilers, 2 GB each;
    # upstream's DeepSpeed configs' AdamW took each env's first launch 2-3 min)
    from deepspeed.git_version_info import installed_ops

    missing = [op for op in ("deepspeed_shm_comm", "fused_adam") if not installed_ops.get(op)]
    assert not missing, f"DeepSpeed was installed without {missing}: delete .tox/deepspeed-wheels, run tox again"


@require_deepspeed
@pytest.mark.parametrize("num_processes", [1, 2])
@pytest.mark.parametrize("zero_stage", [2, 3])
def test_deepspeed_state_is_reset_and_the_trainer_trains(tmp_path, zero_stage, num_processes):
    reports = launch(tmp_path, ["--use_deepspeed", "--zero_stage", str(zero_stage)], num_processes)
    for report in reports["accelerator_first"]:
        assert report["type"] == "DEEPSPEED" and "DeepSpeedEngine" in report["trained"]
        assert report["kept"] == PATCHED  # by the arguments; published: reset
        assert_one_line_per_launch(report, "`deepspeed_plugins`")
    assert_trains_as_without_a_user_accelerator(reports, "DEEPSPEED", "no")


@pytest.mark.parametrize("precision", ["bf16", "no"])
def test_fsdp2_state_is_kept_by_the_arguments_and_reset_by_the_trainer(tmp_path, precision):
    # `ACCELERATE_USE_CPU`: what a GPU host's `Accelerator()` finds by itself, one device per process
    flags = ["--use_fsdp", "--fsdp_version", "2", "--mixed_precision", precision]
    reports = launch(tmp_path, flags, 2, env={"ACCELERATE_USE_CPU": "true"})
    for report in reports["accelerator_first"]:
        assert report["type"] == "FSDP" and report["kept"] == PATCHED, report
        assert_one_line_per_launch(report, "`fsdp_plugin`")
    assert_trains_as_without_a_user_accelerator(reports, "FSDP", precision)
