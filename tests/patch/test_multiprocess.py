"""Two CPU processes under `accelerate launch` (gloo): every rank keeps its distributed state."""

import json

import pytest

from harness.scenarios import POLICIES
from tests.testing_utils import PATCHED, RESET_WARNING, SCRIPTS, accelerate_launch, free_ports, launch_env

MODES = ("keep", "end_training", "fsdp_launch", "fsdp_launch_bf16", "fsdp1_launch", "fsdp1_launch_bf16", "fsdp_plugin")
SCENARIOS = [f"{policy}/{mode}" for mode in MODES for policy in POLICIES]
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
@pytest.mark.parametrize(
    "mode", ["keep", "fsdp_launch", "fsdp_launch_bf16", "fsdp1_launch", "fsdp1_launch_bf16", "end_training"]
)
def test_every_rank_keeps_its_state_quietly(ranks, mode, policy):
    # `fsdp_*`: a `Trainer`'s own Accelerator would build FSDP from the same variables, its plugin with the same mixed
    # precision policy (and FSDP1's `sync_module_states` initializer on the same device); `end_training`: the
    # arguments build the process group again, as published does, and the state put back uses it
    reports = ranks[f"{policy}/{mode}"]
    assert [r["before"]["rank"] for r in reports] == [0, 1]
    kind = "FSDP" if mode.startswith(("fsdp_", "fsdp1_")) else "MULTI_CPU"
    for r in reports:
        assert r["before"] == {**r["before"], "type": f"DistributedType.{kind}", "world": 2}
        if PATCHED and policy != "reset":
            assert r["after"] == r["before"]
        else:
            assert r["after"] is None  # discarded: the published behaviour, and the patched `reset`
        assert "state" not in r["logged"].lower() and r["error"] is None, r


@pytest.mark.parametrize("policy", POLICIES)
def test_fsdp_plugin_passed_in_code_is_not_what_a_trainer_builds(ranks, policy):
    # `Accelerator(fsdp_plugin=...)` sets `ACCELERATE_USE_FSDP` itself, but a `Trainer` would build a default plugin
    # from that variable, not this one: the state is not the one the arguments create
    # the message names the fields that differ (the launch set no FSDP_VERSION: a `Trainer` builds FSDP1), not the
    # whole plugin; the warning comes once, from the main process
    difference = "`fsdp_plugin.fsdp_version` is `2`, not `1`; "
    for rank, r in enumerate(ranks[f"{policy}/fsdp_plugin"]):
        assert r["before"]["type"] == "DistributedType.FSDP"
        if PATCHED and policy == "preserve":
            assert r["after"] == r["before"] and difference in r["error"] and len(r["error"]) < 1200, r["error"]
            continue
        assert r["after"] is None and r["error"] is None
        if PATCHED and policy == "auto" and rank == 0:
            (line,) = r["logged"].splitlines()
            assert RESET_WARNING in line and difference in line and len(line) < 1200, line
        else:
            assert r["logged"] == ""
