"""Sharding asked for is sharding done, or the run does not start. `sharding: fsdp` trains with accelerate's FSDP2
plugin on GPUs; accelerate 1.15 turns `--use_fsdp` on CPU processes into DDP without a word (see the notes), so the
sharded run is proven on CPU with `tests/scripts/fsdp_on_cpu.py`, which sets FSDP up there as accelerate does on GPUs
(torch's FSDP2 itself shards over gloo)."""

import subprocess
import sys

import pytest
import torch

from tests.conftest import SAMPLE_PROMPTS
from tests.demo_utils import CONFIG, assert_ok, generate, losses_by_step, run_demo, summary
from tests.testing_utils import ROOT, SCRIPTS, bug_on_unpatched, free_ports, launch_env, require_dia
from tpu_demo.config.arguments import LaunchArguments
from tpu_demo.launch import FSDP_FLAGS, launch_arguments

pytestmark = require_dia
RUN = ["max_steps=4", "logging_steps=1", "save_steps=2", "eval_steps=4", "report_to=none"]


def test_fsdp_that_accelerate_does_not_set_up_is_refused(tmp_path):
    cmd, env = launch_arguments("MULTI_CPU", LaunchArguments(num_processes=2, main_process_port=free_ports()[0]))
    cmd.remove("--multi_gpu")  # accelerate takes one of --multi_gpu and --use_fsdp; CPU processes come from the env
    settings = [f"output_dir={tmp_path / 'run'}", "max_steps=2", "report_to=none"]
    result = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", *cmd, "--use_fsdp", "--fsdp_version", "2",
         "-m", "tpu_demo.train", str(CONFIG), *settings],
        env={**launch_env(), **env}, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "tpu_demo: FSDP was asked for (ACCELERATE_USE_FSDP), but accelerate set up MULTI_CPU" in result.stderr
    # accelerate's launcher reports the failed child with its own traceback; the program's frames are not in it
    assert not (tmp_path / "run" / "final").exists() and str(ROOT / "tpu_demo") not in result.stderr


def sharded_run(output_dir, *overrides):
    """The fine-tune on two CPU processes with accelerate's FSDP2 plugin, from the flags `tpu_demo.launch` passes on
    GPUs (`fsdp_on_cpu` makes accelerate 1.15 set FSDP up on CPU processes, as it does on GPUs)."""
    cmd, env = launch_arguments("MULTI_CPU", LaunchArguments(num_processes=2, main_process_port=free_ports()[0]))
    assert "--use_fsdp" not in cmd
    cmd = [flag for flag in cmd if flag != "--multi_gpu"] + FSDP_FLAGS
    settings = [f"output_dir={output_dir}", *RUN, "sharding=fsdp", *overrides]
    return subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", *cmd, str(SCRIPTS / "fsdp_on_cpu.py"), str(CONFIG),
         *settings],
        env={**launch_env(), **env}, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


@bug_on_unpatched
@pytest.mark.xdist_group("two_process_run")  # conftest.py's run: the same settings on two processes, unsharded
def test_sharded_training_equals_unsharded_and_resumes_exactly(two_process_run, tmp_path):
    from transformers import DiaForConditionalGeneration

    unsharded, result = two_process_run
    assert_ok(result)
    sharded, resumed = tmp_path / "fsdp", tmp_path / "fsdp_resumed"
    settings = [f"codec={unsharded.parent / 'codec'}", f"sample_prompts={SAMPLE_PROMPTS}", "sample_every=2",
                "sample_max_frames=20"]  # fmt: skip
    assert_ok(sharded_run(sharded, *settings))
    assert summary(sharded)["distributed_type"] == "DistributedType.FSDP"
    assert losses_by_step(sharded) == pytest.approx(losses_by_step(unsharded), rel=1e-5)
    # checkpoints stay sharded: one part per process, written by each
    parts = sorted(p.name for p in (sharded / "checkpoints/step-2/pytorch_model_fsdp_0").iterdir())
    assert parts == [".metadata", "__0_0.distcp", "__1_0.distcp"], parts
    # samples come from the gathered weights (a sharded model generates only with every process stepping)
    assert sorted(p.name for p in (sharded / "samples/step-2").iterdir()) == ["prompt-1.wav", "prompt-2.wav"]
    # final/ is whole: transformers loads it, with the unsharded run's weights up to float rounding, which AdamW
    # scales up for near-zero gradients (measured: 6e-8 on 5.23, 2.3e-5 on 4.53.3; one step moves a weight ~lr, 3e-3)
    model = DiaForConditionalGeneration.from_pretrained(sharded / "final")
    reference = DiaForConditionalGeneration.from_pretrained(unsharded / "final").state_dict()
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, reference[name], rtol=0, atol=1e-4, msg=name)
    # a sharded checkpoint is listened to as final/ is: `generate` reads its parts in one process
    said = {}
    for source in ("final", "checkpoints/step-4"):
        said[source] = tmp_path / f"{source.replace('/', '-')}.wav"
        assert_ok(generate(sharded / source, "[S1] Hello there.", "--out", said[source]))
    assert said["final"].read_bytes() == said["checkpoints/step-4"].read_bytes()
    # interrupted after the checkpoint at step 2, resumed from the sharded checkpoint: the uninterrupted run's losses
    assert_ok(sharded_run(resumed, "stop_after_steps=2"))
    result = sharded_run(resumed, "resume_from_checkpoint=latest")
    assert_ok(result)
    assert "resumed at step 2" in result.stdout
    assert losses_by_step(resumed) == losses_by_step(sharded)
    assert summary(resumed)["eval_loss"] == summary(sharded)["eval_loss"]


@bug_on_unpatched
@pytest.mark.xdist_group("two_process_run")
def test_best_model_is_loaded_from_a_sharded_checkpoint(two_process_run, tmp_path):
    from safetensors.torch import load_file
    from transformers import DiaForConditionalGeneration

    unsharded, result = two_process_run
    assert_ok(result)
    # the highest loss is "best": step 2's checkpoint, not the last step's weights
    best = ["load_best_model_at_end=true", "metric_for_best_model=loss", "greater_is_better=true", "eval_steps=2"]
    result = sharded_run(tmp_path / "run", *best)
    assert_ok(result)
    assert "loaded the best model: step 2" in result.stdout
    final = DiaForConditionalGeneration.from_pretrained(tmp_path / "run" / "final").state_dict()
    step_2 = load_file(unsharded / "checkpoints/step-2/model.safetensors")  # the unsharded run's, same steps
    for name, tensor in step_2.items():
        torch.testing.assert_close(final[name], tensor, rtol=0, atol=1e-4, msg=name)


def test_lora_with_sharding_is_refused(tmp_path):
    pytest.importorskip("peft")
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model.dia import tiny_config

    DiaForConditionalGeneration(tiny_config()).save_pretrained(tmp_path / "base")
    result = sharded_run(tmp_path / "run", f"model={tmp_path / 'base'}", "lora_r=4")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "tpu_demo: lora_r: LoRA is not sharded by this fine-tuner" in result.stderr
    assert not (tmp_path / "run" / "final").exists()


def test_launcher_passes_accelerates_fsdp_flags_on_gpus():
    cmd, env = launch_arguments("MULTI_GPU", LaunchArguments(num_processes=4, sharding="fsdp"))
    assert "--multi_gpu" not in cmd and cmd[cmd.index("--use_fsdp") :][: len(FSDP_FLAGS)] == FSDP_FLAGS
    assert cmd[cmd.index("--num_processes") + 1] == "4" and env == {}


@pytest.mark.parametrize("distributed_type", ["NO", "MULTI_CPU"])
def test_sharding_where_nothing_shards_is_refused_before_the_launch(distributed_type):
    result = subprocess.run(
        [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), "sharding=fsdp", f"distributed_type={distributed_type}",
         "num_processes=2", "--dry-run"],
        env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"sharding: fsdp needs GPUs (distributed_type MULTI_GPU) or XLA devices, not {distributed_type}" in (
        result.stderr
    )


def test_sharding_on_xla_launches_one_process_per_host():
    result = subprocess.run(
        [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), "sharding=fsdp", "distributed_type=XLA", "--dry-run"],
        env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "tpu_demo: XLA: one process on this host" in result.stdout and "--num_processes 1 " in result.stdout
    assert "--use_fsdp" not in result.stdout


def test_sharding_asked_in_the_config_but_not_set_up_is_refused(tmp_path):
    # e.g. `accelerate launch --multi_gpu -m tpu_demo.train` with `sharding: fsdp` in the YAML
    result = run_demo(tmp_path / "run", "sharding=fsdp", "max_steps=1", launcher=False)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "tpu_demo: sharding: fsdp, but accelerate set up NO: the model would train unsharded" in result.stderr
    assert not (tmp_path / "run" / "final").exists()


def test_sharding_no_written_bare_is_read_as_no(tmp_path):
    # YAML 1.1 reads a bare `no` as false, as in the 1.6B config's `sharding: no`
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG.read_text() + "sharding: no\n")
    result = subprocess.run(
        [sys.executable, "-m", "tpu_demo.launch", str(config), "num_processes=2", "--dry-run"],
        env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert_ok(result)
    assert "--use_fsdp" not in result.stdout


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["sharding=fsdp", "lora_r=16", "distributed_type=MULTI_GPU"], "tpu_demo: lora_r: LoRA is not sharded"),
        (["num_proceses=2"], "tpu_demo: unknown config keys: num_proceses"),  # not once per process, after the start
    ],
)
def test_the_launcher_refuses_before_any_process_starts(overrides, message):
    result = subprocess.run(
        [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *overrides, "--dry-run"],
        env=launch_env(), cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 1 and message in result.stderr, result.stderr
    assert "accelerate launch" not in result.stdout
