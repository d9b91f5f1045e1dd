"""The tests the upstream PR adds, in upstream's layout: they pass on the patched release and fail on the published
one where they test the fix; its launched program, #35702's, runs here on CPU processes."""

import importlib.util
import json
import subprocess
import sys

import pytest
import transformers

from harness.pins import newest
from tests.testing_utils import PATCHED, ROOT, SCRIPTS, free_ports, launch_env
from tests.upstream_layout import assemble

IN_PROCESS = "tests/trainer/test_training_args_accelerator_state.py"
SCRIPT = "tests/trainer/distributed/scripts/accelerator_then_arguments.py"
CONFIGS = "tests/trainer/distributed/accelerate_configs"
# what tests the fix fails on the published release; the rest guard sequences the published release gets right
FIXED = {
    "test_a_device_named_without_its_index_is_the_same_device_0_without_an_index",
    "test_a_device_named_without_its_index_is_the_same_device_1_another_index",
    "test_a_device_named_without_its_index_is_the_same_device_2_another_type",
    "test_a_kept_state_stays_its_accelerators",
    "test_a_kept_state_with_a_plugin_is_reset_with_an_info_line_0_held",
    "test_a_kept_state_with_a_plugin_is_reset_with_an_info_line_1_passed",
    "test_a_later_accelerator_joins_the_kept_state_which_the_trainer_checks",
    "test_a_plugin_used_again_by_a_new_accelerator_is_not_a_kept_state_0_after_arguments_reset_it",
    "test_a_state_kept_by_later_arguments_is_checked_for_earlier_ones_0_bf16",
    "test_a_state_kept_by_later_arguments_is_checked_for_earlier_ones_1_compiling",
    "test_a_state_made_after_the_arguments_discarded_theirs_is_left_to_accelerate",
    "test_a_subclass_with_its_own_accelerator_does_not_reuse_a_kept_state",
    "test_a_trainer_checks_a_state_other_arguments_kept_whatever_its_own_policy_0_reset",
    "test_a_trainer_checks_a_state_other_arguments_kept_whatever_its_own_policy_1_preserve",
    "test_a_trainer_checks_a_state_other_arguments_kept_whatever_its_own_policy_2_use_configured_state",
    "test_an_accelerator_that_failed_after_storing_its_state_is_kept",
    "test_existing_state_is_kept",
    "test_existing_state_is_validated_0_dict",
    "test_existing_state_is_validated_1_json_file",
    "test_existing_state_is_validated_2_command_line",
    "test_fresh_init_2_after_a_failed_try",
    "test_hyperparameter_search_keeps_an_equal_state_0_equal",
    "test_hyperparameter_search_keeps_an_equal_state_1_compiling_trials",
    "test_preserve_keeps_a_state_as_it_is",
    "test_preserve_without_a_state_sets_one_up",
    "test_reset",
    "test_state_left_incomplete_is_set_up_again_0_failed_accelerator",
    "test_state_left_incomplete_is_set_up_again_1_failed_accelerator",
    "test_state_left_incomplete_is_set_up_again_2_bare_accelerator_state",
    "test_state_left_incomplete_is_set_up_again_3_bare_accelerator_state",
    "test_state_left_incomplete_is_set_up_again_4_bare_accelerator_state_with_a_plugin",
    "test_state_of_an_accelerator_that_found_the_cpu_is_kept",
    "test_state_of_another_partial_state_is_reset_with_one_line",
    "test_state_with_a_launched_plugin_is_kept_by_the_arguments_and_reset_by_the_trainer_0_fsdp_plugin",
    "test_state_with_a_launched_plugin_is_kept_by_the_arguments_and_reset_by_the_trainer_1_megatron_lm_plugin",
    "test_trainer_compares_a_cpu_a_subclass_asks_for",
    "test_trainer_compares_what_a_subclass_passes",
    "test_trainer_keeps_a_state_equal_to_its_accelerator",
    "test_trainer_keeps_a_state_that_compiles_as_its_arguments_ask",
    "test_trainer_resets_a_kept_state_that_compiles_in_another_mode",
    "test_trainer_resets_a_kept_state_that_differs_from_its_accelerator_0_mixed_precision",
    "test_trainer_resets_a_kept_state_that_differs_from_its_accelerator_1_arguments_mixed_precision",
    "test_trainer_resets_a_kept_state_that_differs_from_its_accelerator_2_dynamo",
    "test_trainer_resets_a_kept_state_that_differs_from_its_accelerator_3_both",
}


def run_pytest(root, *paths):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(root), *paths]
    return subprocess.run(cmd, env=launch_env(), capture_output=True, text=True, cwd=root)


def test_in_process_file(tmp_path):
    result = run_pytest(assemble(tmp_path), IN_PROCESS)
    summary = result.stdout.splitlines()[-1]
    failed = {line.split(" - ")[0].rsplit("::", 1)[-1] for line in result.stdout.splitlines() if line[:7] == "FAILED "}
    if PATCHED:
        assert result.returncode == 0, result.stdout[-4000:]
        assert "passed" in summary and "failed" not in summary
        if transformers.__version__ == newest():  # the figure the PR states (older releases skip a 5.x case)
            cases = int(summary.split(" passed")[0].split()[-1])
            assert f"{cases} cases" in (ROOT / "docs/PULL_REQUEST.md").read_text(), summary
    else:
        assert failed == FIXED, result.stdout[-4000:]


def test_distributed_file_is_marked_for_several_accelerators(tmp_path):
    # upstream runs it on multi-GPU runners; on a host without two accelerators every case skips with that reason
    result = run_pytest(assemble(tmp_path), "tests/trainer/distributed/test_trainer_distributed_accelerator_state.py")
    assert result.returncode == 0, result.stdout[-4000:]
    skipped = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all("multiple accelerators" in line for line in skipped), skipped


@pytest.mark.parametrize(
    "config, num_processes", [("ddp", 2), ("fsdp2", 2), ("deepspeed_zero2", 1), ("deepspeed_zero3", 1)]
)
def test_the_launched_program_on_cpu_processes(tmp_path, config, num_processes):
    if config.startswith("deepspeed") and importlib.util.find_spec("deepspeed") is None:
        pytest.skip("needs deepspeed (tox's patched and unpatched envs build it)")
    # a CPU-only host's `accelerate launch` of upstream's own config files (written for GPUs): CPU processes, one for
    # DeepSpeed (with several, a plain `Accelerator()` on CPU counts one process per rank: DeepSpeed's batch check
    # fails, published or patched)
    root = assemble(tmp_path / "tree")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(root / CONFIGS / f"{config}.yaml")]
    cmd += ["--num_processes", str(num_processes), "--main_process_port", str(free_ports()[0])]
    cmd += [str(SCRIPTS / "run_and_exit.py"), str(root / SCRIPT), "--output_dir", str(out), "--report_to", "none"]
    cmd += ["--max_steps", "3", "--save_strategy", "no", "--per_device_train_batch_size", "2"]
    env = launch_env(PYTHONPATH=f"{root}:{launch_env()['PYTHONPATH']}")
    if not config.startswith("deepspeed"):
        # `ACCELERATE_USE_CPU`: what a GPU host's plain `Accelerator()` finds by itself, one device per process (gloo).
        # Not for DeepSpeed: with it accelerate sets up MULTI_CPU, not DeepSpeed (whose CPU accelerator runs here);
        # and its one process's state has no backend for the arguments' `gloo` to differ from
        cmd += ["--ddp_backend", "gloo"]
        env["ACCELERATE_USE_CPU"] = "true"
    # from the repository's root: upstream's DeepSpeed configs name their json relative to it
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=root)
    assert result.returncode == 0, result.stderr[-3000:]
    kind = {"ddp": "MULTI_CPU", "fsdp2": "FSDP"}.get(config, "DEEPSPEED")
    for rank in range(num_processes):
        report = json.loads((out / f"rank{rank}.json").read_text())
        assert report["global_step"] == 3 and report["distributed_type"] == kind, report
        assert report["kept_by_arguments"] == PATCHED, report
        if config == "ddp" or not PATCHED or rank > 0:
            assert report["reset_lines"] == [], report
        else:  # the `Trainer`'s plugin cannot be reused: said once, by rank 0, at INFO
            (line,) = report["reset_lines"]
            assert ("`fsdp_plugin`" if config == "fsdp2" else "`deepspeed_plugins`") in line, line
            assert "it cannot be reused" in line, line
