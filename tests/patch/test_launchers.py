"""Programs under launchers: a kept state must be the one a fresh state would be in that process and launch.

Each launcher runs its programs once (harness/launch_worker.py) and every rank reports what it saw; the checks
read those reports. On a CPU machine `Accelerator()` and `PartialState()` without `cpu=True` build a
single-process state even under a 2-process launch, so arguments with `use_cpu=True` must not keep it.
"""

import json
import subprocess
import sys

import pytest

from harness.pins import ROOT
from tests.testing_utils import PATCHED, free_ports, launch_env

WORKER = ROOT / "harness" / "launch_worker.py"
pytestmark = pytest.mark.xdist_group("launchers")  # one launch per launcher, read by several checks

IN_RANKS = [
    "Accelerator() ; args(use_cpu) ; train ; use first accelerator",
    "PartialState() ; args(use_cpu) ; train",
    "args() ; replace(use_cpu) ; train",
]
FROM_PARENT = [
    "args() | args(use_cpu) ; train",
    "PartialState() | args(use_cpu) ; train",
    "Accelerator() ; args() | args(use_cpu)",
]
DISTRIBUTED = ["ok: distributed/world 2/rank {rank}/cpu", "ok: 2 steps/no/MULTI_CPU/2 processes/rank {rank}"]


def reports(out, launcher) -> list[dict]:
    return [json.loads((out / f"{launcher}-rank{rank}.json").read_text()) for rank in (0, 1)]


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory):
    out = tmp_path_factory.mktemp("torchrun")
    (port,) = free_ports()
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    cmd = [*launcher, str(WORKER), str(out), "torchrun", str(port), *IN_RANKS]
    result = subprocess.run(cmd, env=launch_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return reports(out, "torchrun")


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    out = tmp_path_factory.mktemp("forked")
    (port,) = free_ports()
    cmd = [sys.executable, str(WORKER), str(out), "notebook,debug", str(port), *FROM_PARENT]
    result = subprocess.run(cmd, env=launch_env(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return {launcher: reports(out, launcher) for launcher in ("notebook", "debug")}


@pytest.mark.parametrize("program", IN_RANKS)
def test_torchrun_arguments_get_the_launch_they_run_in(torchrun, program):
    for rank, seen in enumerate(report[program] for report in torchrun):
        assert seen[0].startswith("ok: ")
        assert seen[1:3] == [line.format(rank=rank) for line in DISTRIBUTED], f"rank {rank}"


def test_torchrun_first_accelerator_after_the_trainer(torchrun):
    # the published release discarded its state, the Trainer refilled it; a rebuilt state must leave it the same
    for rank, report in enumerate(torchrun):
        assert report[IN_RANKS[0]][3] == f"ok: MULTI_CPU/2 processes/rank {rank}"


@pytest.mark.parametrize("launcher", ["notebook", "debug"])
@pytest.mark.parametrize("program", FROM_PARENT[:2])
def test_launched_children_do_not_keep_the_parents_state(forked, launcher, program):
    for rank, seen in enumerate(report[program] for report in forked[launcher]):
        assert seen[1:3] == [line.format(rank=rank) for line in DISTRIBUTED], f"{launcher} rank {rank}"


def test_notebook_launcher_after_a_kept_accelerator_is_refused_loudly(forked):
    # the deliberate difference: the arguments no longer destroy the notebook's `Accelerator`, and accelerate
    # refuses to launch while one exists (as it does without transformers); `accelerator_state_policy="reset"`
    # gives the published behaviour back
    seen = forked["notebook"][0][FROM_PARENT[2]]
    if PATCHED:
        assert seen[2].startswith("launch ValueError: To launch a multi-device training from your notebook")
    else:
        assert seen[2] == "ok: distributed/world 2/rank 0/cpu"
