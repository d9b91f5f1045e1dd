"""Two CPU processes under `accelerate launch` (gloo): every rank keeps its distributed state."""

import json

import pytest

from harness.scenarios import POLICIES
from tests.testing_utils import PATCHED, SCRIPTS, accelerate_launch, free_ports, launch_env

MODES = ("keep", "end_training", "fsdp_launch")
SCENARIOS = [f"{policy}/{mode}" for mode in MODES for policy in POLICIES] + ["default/ddp_timeout"]
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
def test_every_rank_keeps_multi_cpu(ranks, policy):
    reports = ranks[f"{policy}/keep"]
    assert [r["before"]["rank"] for r in reports] == [0, 1]
    for r in reports:
        assert r["before"]["type"] == "DistributedType.MULTI_CPU" and r["before"]["world"] == 2
        if PATCHED and policy != "reset":
            assert r["after"] == r["before"]
        else:
            assert r["after"] is None  # discarded: the published behaviour, and the patched `reset`
        if PATCHED:
            assert ("Resetting the existing accelerator state" in r["logged"]) == (policy == "reset")


@pytest.mark.parametrize("policy", POLICIES)
def test_fsdp_set_up_by_the_launcher_is_kept(ranks, policy):
    # `accelerate launch --use_fsdp`: the Trainer's own Accelerator would build FSDP from the same variables
    for r in ranks[f"{policy}/fsdp_launch"]:
        assert r["before"]["type"] == "DistributedType.FSDP" and r["before"]["world"] == 2
        if PATCHED and policy != "reset":
            assert r["after"] == r["before"]
            assert "Resetting the existing accelerator state" not in r["logged"], r["logged"]
        else:
            assert r["after"] is None


@pytest.mark.parametrize("policy", POLICIES)
def test_destroyed_process_group_is_rebuilt(ranks, policy):
    # `end_training()` destroys the process group but leaves the state: keeping it would leave no group to talk on
    for r in ranks[f"{policy}/end_training"]:
        if PATCHED:
            assert "Resetting the existing accelerator state" in r["logged"] and "no longer exists" in r["logged"]


def test_ddp_timeout_on_an_existing_process_group_is_named(ranks):
    for r in ranks["default/ddp_timeout"]:
        if PATCHED:
            assert r["after"] == r["before"]
            assert "`ddp_timeout=600` cannot be applied" in r["logged"]
