"""On a real XLA device (torch_xla's PJRT CPU backend runs the TPU code path): the state and the fine-tune."""

import json
import subprocess
import sys

import pytest
from accelerate import Accelerator
from accelerate.data_loader import DataLoaderStateMixin
from accelerate.utils import DistributedType
from parameterized import parameterized

from tests.demo_utils import (
    CONFIG,
    assert_ok,
    assert_same_weights,
    losses_by_step,
    metrics,
    run_demo,
    summary,
    tiny_codec,
)
from tests.testing_utils import (
    ROOT,
    AccelerateStateTestCase,
    bug_on_unpatched,
    capture_training_args_logs,
    launch_env,
    make_training_args,
    require_dia,
    require_xla,
)


@require_xla
class XlaStateTest(AccelerateStateTestCase):
    @bug_on_unpatched
    def test_xla_state_survives_default_arguments(self):
        accelerator = Accelerator()
        self.assertEqual(accelerator.distributed_type, DistributedType.XLA)
        args = make_training_args(self.output_dir)
        self.assertEqual(accelerator.distributed_type, DistributedType.XLA)
        self.assertEqual(args.device, accelerator.device)

    @parameterized.expand([("auto",), ("preserve",)])
    @bug_on_unpatched
    def test_use_cpu_keeps_xla_state_as_a_fresh_state_is_xla_too(self, policy):
        # where torch_xla is importable accelerate builds an XLA state even for `cpu=True`: the published release's
        # arguments run on `xla:0` too, so the state is the one the arguments would get and is kept
        accelerator = Accelerator()
        with capture_training_args_logs() as warnings:
            args = make_training_args(self.output_dir, policy, use_cpu=True)
        self.assertEqual(accelerator.distributed_type, DistributedType.XLA)
        self.assertEqual(args.device, accelerator.device)
        self.assertNotIn("Resetting", warnings.out)


# bf16, accumulation, eval with a smaller last batch (13 = 8 + 5), checkpoints and logging every other step
XLA_RUN = (
    "max_steps=12",
    "mixed_precision=bf16",
    "gradient_accumulation_steps=2",
    "eval_steps=4",
    "save_steps=4",
    "logging_steps=2",
)
FIXED_SHAPE = "length_buckets=1"  # every batch at the maxima: one graph per kind of step


@require_xla
@require_dia
def test_fine_tune_on_xla_resumes_exactly_without_recompiling(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    samples = [f"codec={tiny_codec(tmp_path / 'codec')}", 'sample_prompts=["[S1] Hello."]', "sample_every=4"]
    assert_ok(run_demo(straight, *XLA_RUN, FIXED_SHAPE, *samples))
    assert_ok(run_demo(resumed, *XLA_RUN, FIXED_SHAPE, *samples, "stop_after_steps=6"))
    assert_ok(run_demo(resumed, *XLA_RUN, FIXED_SHAPE, *samples, "resume_from_checkpoint=latest"))

    final = summary(straight)
    assert final["distributed_type"] == "DistributedType.XLA" and final["device"].startswith("xla")
    assert final["compute_dtype"] == "bfloat16"  # read from the forward, not from the flag
    assert final["last_loss"] < final["first_loss"]
    assert final["eval_samples"] == final["eval_unique_samples"] == final["eval_dataset_size"] == 13
    assert losses_by_step(resumed) == losses_by_step(straight)
    assert_same_weights(straight / "final", resumed / "final")

    for run in (summary(straight), summary(resumed)):
        xla = run["xla"]
        # the graphs are compiled during warm-up; eval and save compile theirs on the first call only
        assert xla["train"]["compilations_first"] > 0 and xla["train"]["compilations_later"] == 0, xla
        assert xla["eval"]["calls"] >= 2 and xla["eval"]["compilations_later"] == 0, xla
        assert xla["save"]["compilations_later"] == 0, xla
        # samples are generated from a host copy: no XLA graph at all
        assert xla["samples"]["compilations_first"] == xla["samples"]["compilations_later"] == 0, xla
        # no device value is read on the host inside a step, except the loss at logging steps
        # one shape: the warm-up is the first steps (and the two after the first evaluation and save, whose graphs
        # start from what those left), the later ones the rest
        later_steps = range(run["steps"] - xla["train"]["calls_later"] + 1, run["steps"] + 1)
        assert xla["train"]["transfers_later"] == len([s for s in later_steps if s % 2 == 0]) > 0, xla
    assert summary(straight)["xla"]["save"]["calls"] == 3
    assert summary(straight)["samples"] == ["samples/step-4", "samples/step-8", "samples/step-12"]


@require_xla
@require_dia
def test_length_buckets_compile_each_shape_once_and_resume_exactly(tmp_path):
    """The default on XLA: text and audio each padded to one of 4 lengths, in the length-grouped order. Each shape's
    graphs compile when it first comes, never again; a resumed run draws the same batches."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    # saves every other step, evaluations every 4th: a save follows an evaluation or a step
    run = (*XLA_RUN, "train_sampling_strategy=group_by_length", "max_steps=16", "save_steps=2")
    assert_ok(run_demo(straight, *run))
    assert_ok(run_demo(resumed, *run, "stop_after_steps=6"))
    assert_ok(run_demo(resumed, *run, "resume_from_checkpoint=latest"))
    assert losses_by_step(resumed) == losses_by_step(straight)
    assert_same_weights(straight / "final", resumed / "final")
    for out in (straight, resumed):
        xla = summary(out)["xla"]
        shapes = xla["train"]["shapes"]
        assert 1 < len(shapes) <= 16, shapes  # synthetic clips of 6-15 frames fall in more than one of them
        assert xla["train"]["compilations_later"] == 0, xla
        assert all(s["compilations_later"] == 0 for s in shapes.values()), shapes
        assert xla["eval"]["compilations_later"] == 0, xla
        assert xla["save"]["calls"] >= 5 and xla["save"]["compilations_later"] == 0, xla
    padded = [m["padding_share"] for m in metrics(straight) if "padding_share" in m]
    assert padded and max(padded) < 0.5, padded


@require_xla
@require_dia
def test_an_epoch_ending_in_a_short_step_ends_it_on_xla_too(tmp_path):
    """88 training samples in batches of 8, 2 a step: the 11th batch is a step of its own, as accelerate ends an epoch
    on CPU and GPU; XLA's prefetch thread iterates the loader where accelerate looks for the epoch's end."""
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run = ("synthetic_samples=101", "max_steps=-1", "num_train_epochs=2", "gradient_accumulation_steps=2",
           "save_strategy=epoch", "eval_strategy=no", "logging_steps=1")  # fmt: skip
    assert_ok(run_demo(straight, *run))
    assert sorted(p.name for p in (straight / "checkpoints").iterdir()) == ["step-12", "step-6"]
    assert summary(straight)["steps"] == 12
    assert_ok(run_demo(resumed, *run, "stop_after_steps=6"))
    assert_ok(run_demo(resumed, *run, "resume_from_checkpoint=latest"))
    assert losses_by_step(resumed) == losses_by_step(straight)


@require_xla
@require_dia
def test_steps_and_evaluation_do_not_follow_the_prefetch_thread(tmp_path, monkeypatch):
    """XLA's loader thread runs ahead of the loop and sets accelerate's end-of-loader flag when it reads the last
    batch; the flag stays set until the thread has handed that batch over. The loop can see it at any earlier batch:
    `accumulate` then syncs there (a bare Accelerator, 10-batch epochs: 4 in 200 synced at their first batch) and
    `gather_for_metrics` cuts the batch to the remainder. Here the thread never leaves a loader, so the flag is seen
    from the moment it read the last batch: the loop still makes 5 steps of 2 batches (80 samples) and evaluates
    13 samples in batches of 4, not 1 a batch."""
    monkeypatch.setattr(DataLoaderStateMixin, "end", lambda loader: None)
    out = tmp_path / "run"
    settings = ["max_steps=-1", "num_train_epochs=1", "gradient_accumulation_steps=2", "logging_steps=1",
                "eval_strategy=epoch", "per_device_eval_batch_size=4", "save_strategy=no"]  # fmt: skip
    assert_ok(run_demo(out, *settings, launcher=False))
    final = summary(out)
    assert final["distributed_type"] == "DistributedType.XLA" and final["steps"] == 5
    assert len(json.loads((out / "seen_rank0.json").read_text())) == 80  # 83 training samples, 10 batches of 8
    assert final["eval_samples"] == final["eval_unique_samples"] == final["eval_dataset_size"] == 13
    assert [m["eval_samples"] for m in metrics(out) if "eval_samples" in m] == [13]


@require_xla
@require_dia
def test_tpu_vm_command_drives_every_device_of_the_host_in_fp32(tmp_path):
    """The command the launcher builds for a TPU VM (one process per host), run on a host of 4 PJRT CPU devices:
    SPMD over all four, data parallel."""
    out = tmp_path / "run"
    settings = [f"output_dir={out}", "report_to=none", "max_steps=4", "eval_strategy=no", "save_strategy=no"]
    script = (
        "import os, sys\n"
        "from tpu_demo.launch import accelerate_command, run_accelerate_launch\n"
        "os.environ['PJRT_DEVICE'] = 'TPU'  # the command a TPU VM gets\n"
        "cmd, env = accelerate_command(sys.argv[1], sys.argv[2:])\n"
        "print(' '.join(cmd), flush=True)\n"
        "os.environ['PJRT_DEVICE'] = 'CPU'  # run where this machine can\n"
        "sys.exit(run_accelerate_launch(cmd, {**env, 'LOCAL_RANK': '0'}))\n"
    )
    cmd = [sys.executable, "-c", script, str(CONFIG), *settings]
    env = launch_env(CPU_NUM_DEVICES="4")
    result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert_ok(result)
    assert "--num_processes 1 " in result.stdout and "--tpu" not in result.stdout
    final = summary(out)
    assert final["distributed_type"] == "DistributedType.XLA" and final["compute_dtype"] == "float32"
    assert final["spmd"]["devices"] == 4 and final["spmd"]["sharding"] == "no"
    assert final["spmd"]["weight_bytes_per_device"] == [final["spmd"]["weight_bytes"]] * 4  # replicated
    assert (out / "final/model.safetensors").is_file()


@require_xla
@pytest.mark.parametrize("value", ["false", "0", "no"])
def test_use_torch_xla_off_is_read_as_accelerate_reads_it(value):
    env = {**launch_env(), "USE_TORCH_XLA": value, "PJRT_DEVICE": "TPU"}
    cmd = [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), "--dry-run"]
    result = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "--num_processes 1" in result.stdout and "tpu_demo: XLA" not in result.stdout


@require_xla
def test_xla_launch_on_one_host_is_one_process_for_all_its_devices():
    result = dry_run("sharding=fsdp", env=launch_env(PJRT_DEVICE="TPU"))
    assert result.returncode == 0, result.stderr
    plan, command = result.stdout.splitlines()
    assert plan == "tpu_demo: XLA: one process on this host, for all of its devices"
    assert "--num_machines 1 " in command and "--num_processes 1 " in command


@require_xla
def test_pod_slice_dry_run_prints_each_hosts_command():
    result = dry_run("num_machines=4", "sharding=fsdp", env=launch_env(PJRT_DEVICE="TPU"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("tpu_demo: XLA pod slice of 4 hosts: every host runs the same command")
    hosts = [line for line in lines if "--worker=" in line]
    assert [line.split("--worker=")[1].split()[0] for line in hosts] == ["0", "1", "2", "3", "all"]
    # without --dry-run; each host's accelerate launch is one process, PJRT joins the hosts
    assert all(line.endswith(f"python -m tpu_demo.launch {CONFIG} num_machines=4 sharding=fsdp'") for line in hosts)
    assert "--num_machines 1 " in lines[-1] and "--num_processes 1 " in lines[-1]


@require_xla
@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["num_machines=2", "machine_rank=1"], "tpu_demo: machine_rank: not on XLA"),
        (["num_machines=2", "main_process_ip=10.0.0.1"], "tpu_demo: main_process_ip: not on XLA"),
    ],
)
def test_settings_pjrt_decides_are_refused_on_xla(settings, message):
    result = dry_run(*settings, env=launch_env(PJRT_DEVICE="TPU"))
    assert result.returncode == 1 and result.stderr.startswith(message), result
    assert len(result.stderr.strip().splitlines()) == 1


@require_xla
@require_dia
def test_a_pod_slice_missing_hosts_is_refused_before_the_model_is_built(tmp_path):
    out = tmp_path / "run"
    result = run_demo(out, "num_machines=2", "max_steps=1")
    assert result.returncode == 1
    assert "tpu_demo: num_machines: 2 hosts, but the XLA runtime joined 1" in result.stderr, result.stderr[-2000:]
    assert not (out / "metrics.jsonl").exists()


@require_xla
@require_dia
def test_torch_compile_is_refused_on_xla_as_xla_compiles_each_step_already(tmp_path):
    out = tmp_path / "run"  # it was accepted, and the model ran uncompiled
    result = run_demo(out, "torch_compile=true", "max_steps=1")
    assert result.returncode == 1
    assert "tpu_demo: torch_compile: not on XLA" in result.stderr, result.stderr[-2000:]
    assert not out.exists()


def dry_run(*settings, env):
    cmd = [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *settings, "--dry-run"]
    return subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)


@require_xla
@require_dia
def test_long_recordings_are_segmented_on_an_xla_host(tmp_path):
    # the recogniser runs on the host CPU, as the codec does: the same clips as on a CPU machine
    pytest.importorskip("jiwer")
    from tests.finetune.test_segmenting import COMMON, user_recordings

    raw = user_recordings(tmp_path / "podcast")
    args = [f"recordings={raw}", *COMMON]
    made = {}
    for device in ("XLA", "CPU"):
        out = tmp_path / device
        env = launch_env() | ({"PJRT_DEVICE": "CPU"} if device == "XLA" else {"USE_TORCH_XLA": "0"})
        if device == "CPU":
            env.pop("LOCAL_RANK", None)  # this env's, for accelerate on an XLA device without a TPU
        cmd = [sys.executable, "-m", "tpu_demo.segment", str(CONFIG), f"dataset={out}", *args]
        assert_ok(subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600))
        made[device] = (out / "metadata.csv").read_text()
    assert made["XLA"] == made["CPU"] and made["XLA"].count("\n") > 1
