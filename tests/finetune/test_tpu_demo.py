"""The Dia fine-tune end to end on eager CPU: one process, two processes (gloo), and an interrupted run resumed."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import SchedulerType

from tests.demo_utils import CONFIG, assert_ok, assert_same_weights, losses_by_step, metrics, run_demo, summary
from tests.testing_utils import PATCHED, ROOT, bug_on_unpatched, free_ports, launch_env, require_dia

pytestmark = require_dia


@bug_on_unpatched
@pytest.mark.parametrize(
    "overrides, numbers",
    [
        (["synthetic_samples=12"], "12 samples, 11 held out for evaluation (eval_samples: 13), 1 left"),
        (["synthetic_samples=20", "per_device_train_batch_size=8"], "20 samples, 13 held out"),
    ],
    ids=["fewer_than_eval", "fewer_than_a_batch"],
)
def test_data_too_small_for_one_step_is_refused_with_the_numbers(tmp_path, overrides, numbers):
    # it waited forever at `train: 0/N` (a loader with no batch, epoch after epoch)
    result = run_demo(tmp_path / "run", *overrides, "max_steps=2", launcher=False, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert numbers in result.stderr and "per_device_train_batch_size (8) x 1 process(es)" in result.stderr
    assert "Traceback" not in result.stderr


@bug_on_unpatched
def test_evaluation_with_no_sample_left_to_hold_out_is_refused(tmp_path):
    # one sample: it trained on it and logged `eval loss n/a on 0 samples` at every evaluation asked for
    settings = ["synthetic_samples=1", "eval_samples=1", "per_device_train_batch_size=1", "max_steps=2"]
    result = run_demo(tmp_path / "run", *settings, launcher=False, timeout=120)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "1 samples: none left to hold out for evaluation (eval_samples: 1, eval_strategy: steps)" in result.stderr
    assert "Traceback" not in result.stderr


@bug_on_unpatched
def test_numbers_yaml_reads_as_text_are_numbers(tmp_path):
    # YAML 1.1 reads `1e-4` as a string: it crashed with a TypeError after the model was built
    result = run_demo(tmp_path / "run", "learning_rate=1e-3", "max_steps=1", "eval_strategy=no", launcher=False)
    assert_ok(result)
    assert metrics(tmp_path / "run")[0]["lr"] <= 1e-3


@bug_on_unpatched
def test_per_epoch_evaluation_and_saving_include_the_last_epoch(tmp_path):
    out = tmp_path / "run"
    settings = ["synthetic_samples=29", "max_steps=-1", "num_train_epochs=2", "eval_strategy=epoch"]
    assert_ok(run_demo(out, *settings, "save_strategy=epoch", "logging_steps=1", launcher=False))
    # 16 training samples, batches of 8: 2 steps an epoch
    assert [m["step"] for m in metrics(out) if "eval_loss" in m] == [2, 4]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2", "step-4"]


@bug_on_unpatched
def test_a_fraction_of_an_epoch_rounds_up_to_a_step_as_in_the_trainer(tmp_path):
    settings = ["synthetic_samples=29", "max_steps=-1", "num_train_epochs=1.25", "eval_strategy=no"]
    assert_ok(run_demo(tmp_path / "run", *settings, "logging_steps=1", launcher=False))
    # 2 steps an epoch: 2.5 steps, 3 as the Trainer counts them (it stopped at 2)
    assert [m["step"] for m in metrics(tmp_path / "run") if "loss" in m] == [1, 2, 3]


@bug_on_unpatched
def test_steps_below_one_are_a_ratio_of_the_run_as_the_trainer_reads_them(tmp_path):
    # save_steps=0.25 crashed with a ZeroDivisionError; logging_steps=0.5 logged every step
    out = tmp_path / "run"
    ratios = ["logging_steps=0.5", "eval_steps=0.5", "save_steps=0.25"]
    assert_ok(run_demo(out, "max_steps=8", *ratios, "save_total_limit=10", launcher=False))
    assert [m["step"] for m in metrics(out) if "loss" in m] == [4, 8]
    assert [m["step"] for m in metrics(out) if "eval_loss" in m] == [4, 8]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2", "step-4", "step-6", "step-8"]


@bug_on_unpatched
def test_max_grad_norm_zero_does_not_clip_as_the_trainer_reads_it(tmp_path):
    # it clipped every gradient to zero: the weights never moved
    settings = ["max_steps=3", "logging_steps=1", "eval_strategy=no", "save_strategy=no"]
    for norm in ("0", "1e9"):
        assert_ok(run_demo(tmp_path / norm, *settings, f"max_grad_norm={norm}", launcher=False))
    assert losses_by_step(tmp_path / "0") == losses_by_step(tmp_path / "1e9")


@bug_on_unpatched
@pytest.mark.parametrize(
    "scheduler, halves",  # each evaluation halves the learning rate (never better); greedy's: doubles when better
    [
        ("reduce_lr_on_plateau", '{"patience": 0, "factor": 0.5, "threshold": 1.0}'),
        pytest.param(
            "greedy", '{"patience": 0, "factor": 0.5}',
            marks=pytest.mark.skipif("greedy" not in {t.value for t in SchedulerType}, reason="no GreedyLR before 5"),
        ),
    ],
)  # fmt: skip
def test_schedulers_of_a_metric_step_at_each_evaluation_and_resume_as_in_the_trainer(tmp_path, scheduler, halves):
    # it crashed at the first step: ReduceLROnPlateau.step() missing 1 required positional argument: 'metrics'
    settings = ["max_steps=6", "logging_steps=1", "eval_steps=2", "save_steps=4", "learning_rate=0.004"]
    settings += [f"lr_scheduler_type={scheduler}", f"lr_scheduler_kwargs={halves}"]
    assert_ok(run_demo(tmp_path / "run", *settings, launcher=False))
    lrs = [m["lr"] for m in metrics(tmp_path / "run") if "loss" in m]
    assert lrs[:2] == [0.004, 0.004] and len(set(lrs)) == 3
    if scheduler == "reduce_lr_on_plateau":
        assert lrs == pytest.approx([0.004, 0.004, 0.002, 0.002, 0.001, 0.001])
    resumed = tmp_path / "resumed"  # the scheduler's state is saved with the checkpoint
    assert_ok(run_demo(resumed, *settings, "stop_after_steps=4", launcher=False))
    assert_ok(run_demo(resumed, *settings, "resume_from_checkpoint=latest", launcher=False))
    assert [m["lr"] for m in metrics(resumed) if "loss" in m] == lrs


@bug_on_unpatched
def test_no_held_out_samples_trains_and_saves_without_evaluation(tmp_path):
    result = run_demo(tmp_path / "run", "eval_samples=0", "eval_strategy=no", "max_steps=2", launcher=False)
    assert_ok(result)
    assert summary(tmp_path / "run")["eval_loss"] is None and (tmp_path / "run/final").is_dir()
    refused = run_demo(tmp_path / "refused", "eval_samples=0", "eval_strategy=steps", "max_steps=2", launcher=False)
    assert (
        refused.returncode == 1 and "eval_strategy: steps needs held-out samples (eval_samples: 0)" in refused.stderr
    )


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_one_process_learns_and_saves_a_reloadable_model(tmp_path):
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.codes import CodesDataset, DiaCollator
    from tpu_demo.training.loss import MODEL_INPUTS, CodebookLoss

    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=60", "eval_strategy=no", "save_steps=20", "save_total_limit=2"))
    result = summary(out)
    assert result["distributed_type"] == "DistributedType.NO" and result["compute_dtype"] == "float32"
    assert result["xla"] is None
    assert result["last_loss"] < result["first_loss"] / 2
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-40", "step-60"]  # save_total_limit
    logged = [m for m in metrics(out) if "loss" in m]
    assert [m["step"] for m in logged] == list(range(5, 61, 5))
    for m in logged:
        assert m["grad_norm"] > 0 and m["tokens_per_s"] > 0 and m["peak_memory_mb"] > 0 and m["lr"] >= 0

    model = DiaForConditionalGeneration.from_pretrained(out / "final").eval()
    DiaForConditionalGeneration.from_pretrained(out / "checkpoints/step-40")  # a checkpoint carries its config
    data = CodesDataset(out / "synthetic")
    held_out = json.loads((out / "split.json").read_text())["eval"]
    assert len(held_out) == result["eval_dataset_size"] and held_out != list(range(83, 96))  # random, seeded
    eval_set = [data[i] for i in held_out]
    batch = DiaCollator(model.config.delay_pattern, 48, 24, text_dropout=0.0, seed=0)(eval_set)
    with torch.no_grad():
        logits = model(**{k: batch[k] for k in MODEL_INPUTS}).logits
    per_sample = CodebookLoss(9).per_sample(logits, batch["labels"], len(eval_set))
    assert per_sample.mean().item() == pytest.approx(result["eval_loss"])


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
@pytest.mark.xdist_group("two_process_run")  # conftest.py's run, shared with test_samples.py
def test_two_processes_shard_gather_and_write_once(two_process_run):
    out, launched = two_process_run
    assert_ok(launched)
    result = summary(out)
    assert result["distributed_type"] == "DistributedType.MULTI_CPU" and result["num_processes"] == 2
    seen = [set(json.loads((out / f"seen_rank{r}.json").read_text())) for r in (0, 1)]
    assert len(seen[0]) == len(seen[1]) == 4 * 8 and not seen[0] & seen[1]  # 4 steps of 8 samples each, no overlap
    assert result["eval_samples"] == result["eval_unique_samples"] == result["eval_dataset_size"] == 13
    assert [m["step"] for m in metrics(out) if "loss" in m] == [1, 2, 3, 4]  # one writer, not one per rank
    assert [m["eval_samples"] for m in metrics(out) if "eval_samples" in m] == [13]
    assert sorted(p.name for p in (out / "final").glob("*.safetensors")) == ["model.safetensors"]
    assert (out / "checkpoints/step-4/model.safetensors").is_file()


RESUME_RUN = ["max_steps=14", "logging_steps=1", "eval_strategy=no", "save_strategy=no"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """The runs the interrupted ones must match, one per sampling order: the data order does not depend on how a
    resume skips batches."""
    runs = {}

    def run(sampling):
        if sampling not in runs:
            runs[sampling] = tmp_path_factory.mktemp("uninterrupted")
            assert_ok(run_demo(runs[sampling], *RESUME_RUN, f"train_sampling_strategy={sampling}", launcher=False))
        return runs[sampling]

    return run


@bug_on_unpatched
def test_a_launcher_told_to_stop_stops_its_run_which_says_how_to_resume(tmp_path):
    # `kill`, a container's stop or a scheduler signals the launcher: it died and left the training process running,
    # writing into the output folder a resumed run would write into too
    import psutil

    settings = [f"output_dir={tmp_path / 'run'}", "report_to=none", "max_steps=100000", "save_steps=2"]
    cmd = [sys.executable, "-m", "tpu_demo.launch", str(CONFIG), *settings, f"main_process_port={free_ports()[0]}"]
    with open(tmp_path / "stderr.txt", "w") as stderr:  # a file: a pipe no one reads fills and blocks the run
        launcher = subprocess.Popen(cmd, env=launch_env(), cwd=ROOT, stderr=stderr, text=True)
    run, deadline = [], time.monotonic() + 300
    try:
        while not (tmp_path / "run/checkpoints/step-2").is_dir() and launcher.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint in 300 s"
            time.sleep(0.2)
        assert launcher.poll() is None, (tmp_path / "stderr.txt").read_text()[-2000:]
        run = psutil.Process(launcher.pid).children(recursive=True)
        launcher.terminate()
        launcher.wait(timeout=120)
        stderr = (tmp_path / "stderr.txt").read_text()
        assert launcher.returncode == 143, stderr[-2000:]
        assert "resume_from_checkpoint=latest" in stderr.splitlines()[-1], stderr[-2000:]
        assert run and not psutil.wait_procs(run, timeout=30)[1]
    finally:  # what a failure left running stops here, not with the test run
        with contextlib.suppress(psutil.NoSuchProcess):
            run = run or psutil.Process(launcher.pid).children(recursive=True)
        for process in [launcher, *run]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
@pytest.mark.parametrize("sampling", ["random", "group_by_length"])
@pytest.mark.parametrize("stateful", [True, False], ids=["stateful_dataloader", "skip_first_batches"])
@pytest.mark.parametrize("stop", [6, 10], ids=["mid_epoch", "epoch_end"])
def test_interrupted_run_resumes_exactly(uninterrupted, tmp_path, stateful, stop, sampling):
    resumed = tmp_path / "resumed"
    common = [*RESUME_RUN, f"stateful_dataloader={stateful}", f"train_sampling_strategy={sampling}"]
    # 10 steps per epoch: interrupted mid-epoch or on an epoch's last batch, resumed across the epoch boundary.
    assert_ok(run_demo(resumed, *common, f"stop_after_steps={stop}", launcher=False))
    assert summary(resumed)["interrupted"] and not (resumed / "final").exists()
    assert_ok(
        run_demo(resumed, *common, f"resume_from_checkpoint={resumed / f'checkpoints/step-{stop}'}", launcher=False)
    )

    assert losses_by_step(resumed) == losses_by_step(uninterrupted(sampling))
    assert_same_weights(uninterrupted(sampling) / "final", resumed / "final")


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
@pytest.mark.parametrize("stateful", [True, False], ids=["stateful_dataloader", "skip_first_batches"])
def test_batches_collated_by_workers_train_and_resume_as_the_main_process_does(uninterrupted, tmp_path, stateful):
    resumed = tmp_path / "resumed"
    common = [*RESUME_RUN, "train_sampling_strategy=group_by_length", "dataloader_num_workers=2"]
    common.append(f"stateful_dataloader={stateful}")
    assert_ok(run_demo(resumed, *common, "stop_after_steps=6", launcher=False))
    assert_ok(run_demo(resumed, *common, "resume_from_checkpoint=latest", launcher=False))
    assert losses_by_step(resumed) == losses_by_step(uninterrupted("group_by_length"))


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_run_resumed_between_logging_steps_logs_what_an_uninterrupted_run_logs(tmp_path):
    """Interrupted at step 6 with a log every 4 steps: the log at step 8 still averages steps 5-8, not 7-8."""
    run = ["max_steps=8", "logging_steps=4", "eval_strategy=no", "save_strategy=no"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert_ok(run_demo(straight, *run, launcher=False))
    assert_ok(run_demo(resumed, *run, "stop_after_steps=6", launcher=False))
    assert_ok(run_demo(resumed, *run, "resume_from_checkpoint=latest", launcher=False))

    def logged(output_dir):
        return [(m["step"], m["loss"], m["grad_norm"]) for m in metrics(output_dir) if "loss" in m]

    assert logged(resumed) == logged(straight)


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_run_resumed_from_an_earlier_checkpoint_logs_each_step_once(tmp_path):
    """Killed after step 6 with the last checkpoint at 4: steps 5 and 6 run again, and their first logs go."""
    run = ["max_steps=8", "logging_steps=1", "eval_strategy=steps", "eval_steps=2", "save_steps=4"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert_ok(run_demo(straight, *run, launcher=False))
    assert_ok(run_demo(resumed, *run, "stop_after_steps=6", launcher=False))
    with open(resumed / "metrics.jsonl", "a") as log:
        log.write('{"step": 6, "lo')  # the line the kill cut short
    assert_ok(run_demo(resumed, *run, f"resume_from_checkpoint={resumed / 'checkpoints/step-4'}", launcher=False))
    assert [m["step"] for m in metrics(resumed)] == [m["step"] for m in metrics(straight)]
    assert losses_by_step(resumed) == losses_by_step(straight)
    assert summary(resumed)["first_loss"] == summary(straight)["first_loss"]  # the run's, not the resumed part's


def test_unpatched_stops_clearly(tmp_path):
    result = run_demo(tmp_path / "run", "max_steps=2", "eval_strategy=no", "save_strategy=no", launcher=False)
    if PATCHED:
        assert_ok(result)
    else:
        assert result.returncode != 0
        assert "reset the Accelerator's state" in result.stderr and "40376" in result.stderr
        assert "AttributeError" not in result.stderr


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["bogus_key=1"], "unknown config keys: bogus_key"),
        (["mixed_precision=fp12"], "fp12"),
        # checked after the config is parsed: on the published release the program stops before, at the state
        pytest.param(["dataset=/nonexistent/codes"], "no such manifest or folder", marks=bug_on_unpatched),
        # a YAML's relative path is read from where the run started, not beside the YAML: the message says where
        pytest.param(
            ["dataset=no/such/codes"],
            f"dataset no/such/codes: no such manifest or folder as {Path.cwd() / 'no/such/codes'} (a relative path "
            "is read from the folder the run started in)",
            marks=bug_on_unpatched,
        ),
        pytest.param(
            ["resume_from_checkpoint=/nonexistent/ckpt"], "is not a checkpoint directory", marks=bug_on_unpatched
        ),
        pytest.param(["codebook_weights=[4,1]"], "codebook_weights: 9 non-negative weights", marks=bug_on_unpatched),
        (["data_dir=my/codes"], "data_dir: now `dataset`"),
        (["model_dir=my/dia"], "model_dir: now `model`"),
        (["learning_rate=fast"], "learning_rate: 'fast' is not a number"),
        (["max_steps=2.5"], "max_steps: 2.5 is not a whole number"),
        pytest.param(
            ["lr_scheduler_type=cosine_with_min_lr"],
            "lr_scheduler_type cosine_with_min_lr: One of min_lr",
            marks=bug_on_unpatched,
        ),
        pytest.param(["lr_scheduler_kwargs={num_cycle: 2}"], "lr_scheduler_type cosine: ", marks=bug_on_unpatched),
    ],
    ids=[
        "unknown_key",
        "bad_choice",
        "missing_data",
        "missing_data_relative",
        "missing_checkpoint",
        "codebook_weights",
        "old_data_dir",
        "old_model_dir",
        "not_a_number",
        "not_a_whole_number",
        "scheduler_needs_a_setting",
        "scheduler_setting_misspelt",
    ],
)
def test_bad_input_gives_a_clear_error(tmp_path, overrides, message):
    out = tmp_path / "outputs" / "run"
    result = run_demo(out, *overrides, launcher=False)
    assert result.returncode != 0
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    # an empty output_dir, or the folder made to hold it, was left behind
    assert not out.parent.exists() or any(path.is_file() for path in out.parent.rglob("*")), list(
        out.parent.rglob("*")
    )


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_corrupt_checkpoint_is_refused_and_kept(tmp_path):
    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=2", "save_steps=2", "eval_strategy=no", launcher=False))
    checkpoint = out / "checkpoints/step-2"
    (checkpoint / "optimizer.bin").write_bytes(b"not a checkpoint")
    result = run_demo(out, "max_steps=4", f"resume_from_checkpoint={checkpoint}", launcher=False)
    assert result.returncode != 0
    assert f"cannot resume from {checkpoint}" in result.stderr
    assert (checkpoint / "model.safetensors").is_file() and (out / "final/model.safetensors").is_file()


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_checkpoint_of_another_model_is_not_called_corrupt(tmp_path):
    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=1", "save_steps=1", "eval_strategy=no", launcher=False))
    checkpoint = out / "checkpoints/step-1"
    result = run_demo(out, "tiny_hidden_size=32", f"resume_from_checkpoint={checkpoint}", launcher=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"cannot resume from {checkpoint}: its weights do not fit this model" in result.stderr
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    result = run_demo(out, f"resume_from_checkpoint={checkpoint}", launcher=False)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"cannot resume from {checkpoint}: model.safetensors is corrupt" in result.stderr


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
@pytest.mark.parametrize("processes", [1, 2])
def test_failed_run_ends_with_its_own_message_through_the_launcher(tmp_path, processes):
    result = run_demo(tmp_path / "run", f"num_processes={processes}", "resume_from_checkpoint=/nonexistent/ckpt")
    assert result.returncode == 1
    assert "resume_from_checkpoint /nonexistent/ckpt is not a checkpoint directory" in result.stderr
    assert "Traceback" not in result.stderr and "CalledProcessError" not in result.stderr


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_interrupted_before_the_first_log_still_ends_cleanly(tmp_path):
    out = tmp_path / "run"
    settings = ["max_steps=10", "logging_steps=5", "stop_after_steps=2", "eval_strategy=no"]
    settings.append("gradient_checkpointing=true")
    assert_ok(run_demo(out, *settings, launcher=False))
    result = summary(out)
    assert result["gradient_checkpointing"]  # read from the model
    assert result["interrupted"] and result["first_loss"] is None
    assert (out / "checkpoints/step-2").is_dir()


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_interrupted_run_saves_its_state_where_its_step_folder_already_exists(tmp_path):
    """The folder may be there already: another process of the run creating it first (a race that left a step-6
    checkpoint with rank 1's files only), or an earlier run in the same output_dir. The state is saved all the same."""
    out = tmp_path / "run"
    (out / "checkpoints/step-2").mkdir(parents=True)
    assert_ok(run_demo(out, "max_steps=10", "stop_after_steps=2", "eval_strategy=no", "save_steps=5", launcher=False))
    names = {p.name for p in (out / "checkpoints/step-2").iterdir()}
    assert {"model.safetensors", "optimizer.bin", "random_states_0.pkl", "custom_checkpoint_0.pkl"} <= names
    assert_ok(run_demo(out, "max_steps=10", "eval_strategy=no", "save_steps=5", "resume_from_checkpoint=latest",
                       launcher=False))  # fmt: skip
    assert summary(out)["steps"] == 10 and not summary(out)["interrupted"]


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_ctrl_c_ends_with_how_to_resume_and_no_traceback(tmp_path, monkeypatch):
    import tpu_demo.training.recipe

    steps = []

    def step_then_ctrl_c(*args, **kwargs):
        steps.append(None)
        if len(steps) == 3:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    real_step = tpu_demo.training.recipe.train_step
    monkeypatch.setattr(tpu_demo.training.recipe, "train_step", step_then_ctrl_c)
    out = tmp_path / "run"
    result = run_demo(out, "max_steps=4", "save_steps=2", "eval_strategy=no", launcher=False)
    assert result.returncode == 130  # as a shell reports Ctrl-C
    assert "interrupted" in result.stderr and "resume_from_checkpoint=latest" in result.stderr
    assert "Traceback" not in result.stderr
    monkeypatch.setattr(tpu_demo.training.recipe, "train_step", real_step)
    assert_ok(run_demo(out, "max_steps=4", "save_steps=2", "eval_strategy=no", "resume_from_checkpoint=latest",
                       launcher=False))  # fmt: skip
    assert summary(out)["steps"] == 4


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_ctrl_c_while_a_steps_samples_are_written_redoes_them_on_resume(tmp_path, monkeypatch):
    # the checkpoint of step 4 was written before its samples: a resume from it never wrote them
    import tpu_demo.evaluation.samples
    from tests.demo_utils import tiny_codec

    real_write = tpu_demo.evaluation.samples.SampleWriter.write

    def ctrl_c_at_step_4(writer, accelerator, model, step):
        if step == 4:
            raise KeyboardInterrupt
        return real_write(writer, accelerator, model, step)

    monkeypatch.setattr(tpu_demo.evaluation.samples.SampleWriter, "write", ctrl_c_at_step_4)
    out = tmp_path / "run"
    settings = [f"codec={tiny_codec(tmp_path / 'codec')}", "max_audio_frames=16", "max_steps=6", "save_steps=2",
                'sample_prompts=["[S1] Hi."]', "sample_every=2", "eval_strategy=no"]  # fmt: skip
    assert run_demo(out, *settings, launcher=False).returncode == 130
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-2"]
    monkeypatch.setattr(tpu_demo.evaluation.samples.SampleWriter, "write", real_write)
    assert_ok(run_demo(out, *settings, "resume_from_checkpoint=latest", launcher=False))
    assert {"step-2", "step-4", "step-6"} <= {p.name for p in (out / "samples").iterdir()}


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
@pytest.mark.parametrize("logging_steps, save_steps, diverged_at", [(2, 4, 4), (5, 3, 3)])
def test_a_diverged_run_stops_before_it_saves_nan_weights(tmp_path, logging_steps, save_steps, diverged_at):
    # it trained on at `loss: NaN`, saved NaN checkpoints (rotating good ones away) and a NaN final/
    out = tmp_path / "run"
    settings = ["learning_rate=1e30", "max_steps=12", f"logging_steps={logging_steps}", f"save_steps={save_steps}"]
    result = run_demo(out, *settings, "eval_strategy=no", launcher=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert f"the training loss is nan at step {diverged_at}" in result.stderr
    assert "resume from a checkpoint before it with a lower learning_rate" in result.stderr
    assert not (out / "final").exists()
    assert all(int(p.name[5:]) < diverged_at for p in (out / "checkpoints").glob("step-*"))


@pytest.mark.parametrize("signal_from", ["KeyboardInterrupt", "SignalException"])
def test_launcher_ends_a_ctrl_c_with_its_exit_code_and_no_traceback(monkeypatch, signal_from):
    """One process: accelerate waits on it and gets the KeyboardInterrupt; several: torch's elastic agent turns the
    signal into a SignalException."""
    import accelerate.commands.launch
    from torch.distributed.elastic.multiprocessing.api import SignalException

    from tpu_demo.launch import run_accelerate_launch

    def interrupted(args):
        raise KeyboardInterrupt if signal_from == "KeyboardInterrupt" else SignalException("got signal: 2", 2)

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", interrupted)
    assert run_accelerate_launch(["--num_processes", "1", "-m", "tpu_demo.train", "unused.yaml"], {}) == 130


def test_sigterm_stops_a_command_as_ctrl_c_does_and_a_second_one_waits_for_it():
    from tpu_demo.cli import Terminated, interrupted_exit_code, terminated_as_interrupted

    before, said = signal.getsignal(signal.SIGTERM), []
    with pytest.raises(Terminated) as stopped, terminated_as_interrupted():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        except Terminated:  # the command's Ctrl-C handling: a second SIGTERM (the launcher's copy) lets it finish
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)
            said.append("interrupted; ...")
            raise
    assert said and interrupted_exit_code(stopped.value) == 143
    assert interrupted_exit_code(KeyboardInterrupt()) == 130
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_launcher_told_to_stop_before_its_run_starts_stops_there(monkeypatch, capsys):
    # SIGTERM before accelerate started a process (or while torch's agent waited for other hosts) was dropped, and
    # the run then started; a process ended by the signal before its own handler gave exit code -15 (241)
    import accelerate.commands.launch

    from tpu_demo.launch import run_accelerate_launch

    def signalled(args):
        os.kill(os.getpid(), signal.SIGTERM)
        raise AssertionError("the launch went on")

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", signalled)
    before = signal.getsignal(signal.SIGTERM)
    assert run_accelerate_launch(["--num_processes", "1", "-m", "tpu_demo.train", "unused.yaml"], {}) == 143
    assert "stopped before the run's processes started" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == before  # the handler it found is back

    def killed(args):
        raise subprocess.CalledProcessError(-signal.SIGTERM, ["python"])

    monkeypatch.setattr(accelerate.commands.launch, "launch_command", killed)
    assert run_accelerate_launch(["--num_processes", "1", "-m", "tpu_demo.train", "unused.yaml"], {}) == 143


@bug_on_unpatched
def test_a_new_run_into_an_earlier_runs_folder_is_refused(tmp_path):
    # it appended to the earlier metrics.jsonl and rotated away its own checkpoints, keeping the earlier run's
    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=2", "save_steps=2", "eval_strategy=no", launcher=False))
    before = (out / "metrics.jsonl").read_text()
    again = run_demo(out, "max_steps=2", "save_steps=2", "eval_strategy=no", launcher=False)
    assert again.returncode == 1 and "Traceback" not in again.stderr
    assert f"output_dir {out} holds an earlier run (checkpoints, metrics.jsonl, final)" in again.stderr
    assert (out / "metrics.jsonl").read_text() == before


@bug_on_unpatched
def test_an_earlier_run_with_no_checkpoint_is_not_said_to_resume(tmp_path):
    # a run stopped before its first checkpoint (or one that saves none): the refusal said "continue it with
    # resume_from_checkpoint=latest", which then found no checkpoint
    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=2", "save_strategy=no", "eval_strategy=no", launcher=False))
    again = run_demo(out, "max_steps=2", "save_strategy=no", "eval_strategy=no", launcher=False)
    assert again.returncode == 1 and "resume_from_checkpoint" not in again.stderr, again.stderr
    refusal = "holds an earlier run (metrics.jsonl, final), which saved no checkpoint: give a new output_dir"
    assert refusal in again.stderr


@bug_on_unpatched
def test_the_demo_with_codec_tiny_speaks_from_final(tmp_path):
    """`tox -e demo` adds `codec=tiny`: a random tiny DAC, saved into final/, so `generate` writes a WAV (noise)."""
    pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
    from tests.demo_utils import generate

    out = tmp_path / "run"
    assert_ok(run_demo(out, "codec=tiny", "max_steps=2", "eval_strategy=no", launcher=False))
    assert (out / "final/codec/config.json").is_file()
    said = generate(out / "final", "[S1] Hello there.", "--out", tmp_path / "hello.wav")
    assert said.returncode == 0 and "Traceback" not in said.stderr, said.stderr
    assert (tmp_path / "hello.wav").stat().st_size > 44  # more than a WAV header
