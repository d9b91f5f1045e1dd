"""Shared helpers for the suite: isolation of accelerate's global state, skips, ports, launches."""

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import pytest
import torch
import transformers
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import is_torch_xla_available
from transformers import TrainingArguments

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "scripts"
POLICY_ENV = "TRANSFORMERS_ACCELERATOR_STATE_POLICY"
POLICIES = ("auto", "preserve", "reset")
PATCHED = "accelerator_state_policy" in TrainingArguments.__dataclass_fields__
TF_VERSION = tuple(int(part) for part in transformers.__version__.split(".")[:2])


def reset_accelerate_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


class AccelerateStateTestCase(unittest.TestCase):
    """Starts and ends every test with no accelerate singleton and no `ACCELERATE_*` or policy variable."""

    def setUp(self):
        super().setUp()
        self.output_dir = tempfile.mkdtemp(prefix="accelerate-state-test-")
        self.addCleanup(shutil.rmtree, self.output_dir, ignore_errors=True)
        self._environ = dict(os.environ)
        for key in list(os.environ):
            if "ACCELERATE" in key and key != POLICY_ENV:
                del os.environ[key]
        os.environ.pop(POLICY_ENV, None)
        reset_accelerate_state()
        self.addCleanup(self._restore)

    def _restore(self):
        reset_accelerate_state()
        os.environ.clear()
        os.environ.update(self._environ)


def make_training_args(output_dir, policy=None, **kwargs):
    """Builds `TrainingArguments` with `policy`; the unpatched release ignores the variable it is passed through."""
    kwargs.setdefault("report_to", "none")
    if policy is not None and PATCHED:
        kwargs["accelerator_state_policy"] = policy
    elif policy is not None:
        os.environ[POLICY_ENV] = policy
    return TrainingArguments(output_dir=str(output_dir), **kwargs)


require_xla = pytest.mark.skipif(not is_torch_xla_available(), reason="needs torch_xla (run `tox -e tpu`)")
require_dia = pytest.mark.skipif(TF_VERSION < (4, 53), reason="Dia ships from transformers 4.53")
bug_on_unpatched = pytest.mark.xfail(
    not PATCHED, strict=True, reason="transformers #40376: the unpatched release discards the state"
)


def worker_port(offset: int = 0) -> int:
    """A free port in a range of its own per pytest-xdist worker, so concurrent launches never collide."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    base = 29500 + 100 * int(worker.removeprefix("gw") or 0) + 10 * offset
    for port in range(base, base + 10):
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)):
                return port
    raise RuntimeError(f"no free port in {base}..{base + 9}")


def launch_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if "ACCELERATE" not in k and not k.startswith("PYTEST_")}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    env.update(extra)
    return env


def accelerate_launch(script, *args, num_processes=2, port_offset=0, timeout=600, env=None):
    """Runs `script` under `accelerate launch` on `num_processes` CPU processes (gloo) and returns the result."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--num_machines", "1", "--mixed_precision", "no"]
    cmd += ["--dynamo_backend", "no"]
    if num_processes > 1:
        cmd += ["--multi_gpu", "--num_processes", str(num_processes)]
        cmd += ["--main_process_port", str(worker_port(port_offset))]
    else:
        cmd += ["--num_processes", "1"]
    cmd += [str(script), *map(str, args)]
    env = dict(env or launch_env())
    if num_processes > 1:
        env.setdefault("ACCELERATE_USE_CPU", "true")  # without an accelerator, MULTI_CPU needs it (gloo)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


class CapturedLogs(list):
    @property
    def text(self) -> str:
        return "\n".join(self)


class capture_training_args_logs:
    """Collects what `transformers.training_args` logs at `level` and above (its logger does not propagate)."""

    def __init__(self, level=logging.WARNING):
        self.level = level
        self.records = CapturedLogs()

    def __enter__(self):
        self.handler = logging.Handler(self.level)
        self.handler.emit = lambda record: self.records.append(record.getMessage())
        logging.getLogger("transformers.training_args").addHandler(self.handler)
        return self.records

    def __exit__(self, *exc):
        logging.getLogger("transformers.training_args").removeHandler(self.handler)


def record_scenario(**fields) -> None:
    """Appends one observed scenario to `$SCENARIO_LOG` (JSON lines) for `harness.matrix_report`."""
    path = os.environ.get("SCENARIO_LOG")
    if path:
        fields |= {"transformers": transformers.__version__, "patched": PATCHED}
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write(json.dumps(fields) + "\n")


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
