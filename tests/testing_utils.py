"""Shared helpers for the suite, on accelerate's and transformers' test tools: isolation of accelerate's global state
(`AccelerateTestCase`), log capture (`CaptureLogger`), free ports, skips, launches."""

import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest.mock import patch

import pytest
import torch
import transformers
from accelerate.state import AcceleratorState, GradientState
from accelerate.test_utils.testing import AccelerateTestCase
from accelerate.utils import is_torch_xla_available
from transformers import TrainingArguments
from transformers.testing_utils import CaptureLogger
from transformers.trainer_pt_utils import AcceleratorConfig
from transformers.utils import logging

from harness.scenarios import POLICY_KEY, is_patched
from tpu_demo.config.arguments import LaunchArguments
from tpu_demo.launch import launch_arguments

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "scripts"
PATCHED = is_patched()
TF_VERSION = tuple(int(part) for part in transformers.__version__.split(".")[:2])


def capture_training_args_logs() -> CaptureLogger:
    """What `TrainingArguments` and the `Trainer` log (transformers' loggers do not propagate to the root one that
    pytest captures)."""
    return CaptureLogger(logging.get_logger("transformers"))


@contextlib.contextmanager
def accelerate_environment_cleared():
    """No `ACCELERATE_*` variable inside; the whole environment as it was after (accelerate's
    `clear_environment` would drop every variable, its `patch_environment` only adds)."""
    with patch.dict(os.environ):
        for key in [key for key in os.environ if "ACCELERATE" in key]:
            del os.environ[key]
        yield


class AccelerateStateTestCase(AccelerateTestCase):
    """accelerate's base (its singletons reset after every test), run without `ACCELERATE_*` variables, and
    from no state: a plain test function run before it on the same xdist worker may have left one (the fine-tune's
    data preparation and generation make a `PartialState`), which accelerate's base resets only after."""

    def setUp(self):
        super().setUp()
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
        self.output_dir = self.enterContext(tempfile.TemporaryDirectory(prefix="accelerate-state-test-"))
        self.enterContext(accelerate_environment_cleared())


def make_training_args(output_dir, policy=None, **kwargs):
    """Builds `TrainingArguments` with `policy` as `accelerator_config`'s `existing_state` (the published release has
    no such key: it always resets)."""
    kwargs.setdefault("report_to", "none")
    if policy is not None and PATCHED:
        config = kwargs.get("accelerator_config", {})
        if isinstance(config, AcceleratorConfig):
            kwargs["accelerator_config"] = dataclasses.replace(config, **{POLICY_KEY: policy})
        else:
            kwargs["accelerator_config"] = {**config, POLICY_KEY: policy}
    return TrainingArguments(output_dir=str(output_dir), **kwargs)


# how each line of the patched release begins where it discards a state it did not create (`existing_state="auto"`)
RESET_WARNING = "Resetting an earlier `Accelerator`'s state"


require_xla = pytest.mark.skipif(not is_torch_xla_available(), reason="needs torch_xla (run `tox -e tpu`)")
require_dia = pytest.mark.skipif(TF_VERSION < (4, 53), reason="Dia ships from transformers 4.53")
# CI's time: a test of what no 4.x release changes (accelerate's machines, the package's imports) runs in the 5.x envs
same_on_every_line = pytest.mark.skipif(TF_VERSION < (5, 0), reason="nothing here a 4.x release changes: 5.x envs")
bug_on_unpatched = pytest.mark.xfail(
    not PATCHED, strict=True, reason="transformers #40376: the unpatched release discards the state"
)


def free_ports(count: int = 1) -> list[int]:
    """Ports the OS has free now, distinct from each other, for the launches of one test. Not transformers'
    `get_torch_dist_unique_port`: in transformers 4.x it returns 29500 + the xdist worker's number, so two workers'
    launches and the ports derived from them met (EADDRINUSE)."""
    import socket

    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def launch_env(**extra) -> dict:
    """The environment of a launched program: no variable of the test run's accelerate or pytest-xdist, one thread."""
    env = {k: v for k, v in os.environ.items() if "ACCELERATE" not in k and not k.startswith("PYTEST_")}
    # the repository first, then whatever put the transformers under test on the path; CPU processes on any host
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=pythonpath)
    env.update(CUDA_VISIBLE_DEVICES="")
    env.update(extra)
    return env


def accelerate_launch(script, *args, num_processes=2, timeout=600, env=None):
    """Runs `script` under `accelerate launch` on `num_processes` CPU processes (gloo), with the command the
    fine-tune's launcher builds (accelerate's `get_launch_command` only formats flags: it knows no CPU processes)."""
    distributed_type = "MULTI_CPU" if num_processes > 1 else "NO"
    port = free_ports()[0] if num_processes > 1 else None
    settings = LaunchArguments(num_processes=num_processes, main_process_port=port)
    launch, launch_vars = launch_arguments(distributed_type, settings)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", *launch, str(script), *map(str, args)]
    env = {**launch_vars, **(env or launch_env())}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


class TinyRegression(torch.nn.Module):
    """y = a*x + b, enough for a `Trainer` to take real optimizer steps."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(1, 1)

    def forward(self, input_x, labels=None):
        y = self.linear(input_x)
        return {"loss": torch.nn.functional.mse_loss(y, labels), "logits": y}


def regression_dataset(length=32, seed=0):
    x = torch.randn(length, 1, generator=torch.Generator().manual_seed(seed))
    return [{"input_x": xi, "labels": 2 * xi + 3} for xi in x]
