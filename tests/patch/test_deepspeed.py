"""DeepSpeed under `accelerate launch` on CPU processes: an `Accelerator` made first, then a `Trainer` trains.

A `Trainer` passes its own DeepSpeed plugin, and accelerate refuses one for a second `Accelerator` over a DeepSpeed
state: the state is reset as the published release resets it, and the `Trainer` trains with a `DeepSpeedEngine`.
"""

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.testing_utils import PATCHED, RESET_WARNING, SCRIPTS, free_ports, launch_env

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed (tox's patched and unpatched envs build it)"
)


def launch_deepspeed(out, zero_stage, num_processes):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--use_deepspeed", "--zero_stage", str(zero_stage)]
    cmd += ["--num_processes", str(num_processes), "--num_machines", "1", "--mixed_precision", "no"]
    cmd += ["--dynamo_backend", "no", "--main_process_port", str(free_ports()[0])]
    result = subprocess.run(
        [*cmd, str(SCRIPTS / "deepspeed_trainer.py"), str(out)], env=launch_env(), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(num_processes)]


@pytest.mark.parametrize("num_processes", [1, 2])
@pytest.mark.parametrize("zero_stage", [2, 3])
def test_trainer_trains_after_an_accelerator_made_first(tmp_path, zero_stage, num_processes):
    for rank, report in enumerate(launch_deepspeed(tmp_path, zero_stage, num_processes)):
        assert report["type"] == "DEEPSPEED"
        assert report["trained"] == "2 steps/DeepSpeedEngine", report
        assert not report["kept"]  # reset, as published
        if PATCHED and rank == 0:  # one line, from the main process, naming why
            (line,) = report["logged"]
            assert RESET_WARNING in line and "`deepspeed_plugins` is `" in line and "DeepSpeed" in line, line
        else:
            assert report["logged"] == [], report
