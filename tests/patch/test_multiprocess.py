"""Two CPU processes under `accelerate launch` (gloo): every rank keeps its distributed state."""

import json

import pytest

from harness.scenarios import POLICIES
from tests.testing_utils import PATCHED, SCRIPTS, accelerate_launch, free_ports, launch_env

MODES = ("keep", "end_training", "fsdp_launch", "fsdp_launch_bf16", "fsdp1_launch", "fsdp1_launch_bf16", "fsdp_plugin")
SCENARIOS = [f"{policy}/{mode}" for mode in (*MODES, "debug_mode", "bf16_then_trainer") for policy in POLICIES]
pytestmark = pytest.mark.xdist_group("multiprocess")  # the checks read one launch: on one worker, it runs once


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Every scenario in one launch of two processes: {scenario: [rank 0's report, rank 1's]}."""
    out = tmp_path_factory.mktemp("multiprocess")
    ports = ",".join(map(str, free_ports(sum(s.endswith("/end_training") for s in SCENARIOS))))  # one per rebuild
    env = launch_env(REBUILD_PORTS=ports)
    result = accelerate_launch(SCRIPTS / "multiprocess_state.py", out, *SCENARIOS, num_processes=2, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    return {scenario: [report[scenario] for report in reports] for scenario in SCENARIOS}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("mode", MODES)
def test_every_rank_keeps_its_state_quietly(ranks, mode, policy):
    # `fsdp_*`: the `PartialState` is the one the arguments set up (its distributed type is the one the FSDP
    # `AcceleratorState` wrote into it); whether the plugin is what a `Trainer` passes, the `Trainer` decides (and
    # resets it: it holds a plugin). `end_training`: the arguments build the process group again, as published does,
    # and the state put back uses it
    reports = ranks[f"{policy}/{mode}"]
    assert [r["before"]["rank"] for r in reports] == [0, 1]
    kind = "FSDP" if mode.startswith(("fsdp_", "fsdp1_")) or mode == "fsdp_plugin" else "MULTI_CPU"
    for r in reports:
        assert r["before"] == {**r["before"], "type": f"DistributedType.{kind}", "world": 2}
        if PATCHED and policy != "reset":
            assert r["after"] == r["before"]
        else:
            assert r["after"] is None  # discarded: the published behaviour, and the patched `reset`
        assert "state" not in r["logged"].lower() and r["error"] is None, r


@pytest.mark.parametrize("policy", POLICIES)
def test_another_partial_state_is_reset_with_one_line_per_launch(ranks, policy):
    # an `Accelerator` in accelerate's debug mode, then arguments without it: its `PartialState` is not theirs; the
    # reset is said once, by rank 0 (`preserve` keeps it as it is)
    reports = ranks[f"{policy}/debug_mode"]
    kept = PATCHED and policy == "preserve"
    for rank, r in enumerate(reports):
        assert r["error"] is None and (r["after"] == r["before"] if kept else r["after"] is None), r
        lines = [line for line in r["logged"].splitlines() if "Accelerator`'s state" in line]
        said = PATCHED and policy in ("default", "auto") and rank == 0
        assert lines == (
            ["Resetting an earlier `Accelerator`'s state: its `debug` is `True`, these arguments' `False`."]
            if said
            else []
        ), r


def test_the_trainers_reset_is_said_once_per_launch(ranks):
    # a bf16 `Accelerator` kept by arguments without bf16: their `Trainer` resets it, which rank 0 says
    for rank, r in enumerate(ranks["auto/bf16_then_trainer"]):
        assert r["error"] is None, r
        lines = [line for line in r["logged"].splitlines() if "Accelerator`'s state" in line]
        said = ["Resetting an earlier `Accelerator`'s state: its `mixed_precision` is `bf16`, this `Trainer`'s `no`."]
        assert lines == (said if PATCHED and rank == 0 else []), r
