"""Two CPU processes under `accelerate launch` (gloo): every rank keeps its distributed state."""

import json

import pytest

from tests.testing_utils import PATCHED, SCRIPTS, accelerate_launch, launch_env


@pytest.mark.parametrize("policy", ["auto", "preserve", "reset"])
def test_every_rank_keeps_multi_cpu(tmp_path, policy):
    env = launch_env(TRANSFORMERS_ACCELERATOR_STATE_POLICY=policy)
    result = accelerate_launch(SCRIPTS / "multiprocess_state.py", tmp_path, num_processes=2, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank*.json"))]
    assert sorted(r["before"]["rank"] for r in ranks) == [0, 1]
    for r in ranks:
        assert r["before"]["type"] == "DistributedType.MULTI_CPU"
        assert r["before"]["world"] == 2
        if PATCHED and policy != "reset":
            assert r["after"] == r["before"]
        else:
            assert r["after"] is None  # discarded: the published behaviour, and the patched `reset`
    if PATCHED and policy == "reset":
        assert result.stderr.count("Resetting the existing accelerator state") == 2


@pytest.mark.parametrize("policy", ["auto", "preserve", "reset"])
def test_destroyed_process_group_is_rebuilt(tmp_path, policy):
    # `end_training()` destroys the process group but leaves the state: keeping it would leave no group to talk on
    env = launch_env(TRANSFORMERS_ACCELERATOR_STATE_POLICY=policy)
    result = accelerate_launch(SCRIPTS / "multiprocess_state.py", tmp_path, "end_training", port_offset=1, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert len(list(tmp_path.glob("rank*.json"))) == 2
    if PATCHED:
        assert result.stderr.count("Resetting the existing accelerator state") == 2
        assert result.stderr.count("no longer exists") == 2


def test_ddp_timeout_on_an_existing_process_group_is_named(tmp_path):
    result = accelerate_launch(SCRIPTS / "multiprocess_state.py", tmp_path, "ddp_timeout", port_offset=2)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank*.json"))]
    if PATCHED:
        assert all(r["after"] == r["before"] for r in ranks)
        assert result.stderr.count("`ddp_timeout=600` cannot be applied") == 2
