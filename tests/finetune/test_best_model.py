"""The best model and early stopping, as Trainer users know them: `load_best_model_at_end`, `metric_for_best_model`,
`greater_is_better`, `early_stopping_patience`/`_threshold`; honoured through a resume, or refused by name."""

import pytest
import torch

from tests.demo_utils import assert_ok, eval_losses, run_demo, summary
from tests.testing_utils import bug_on_unpatched, require_dia

pytestmark = require_dia
EVERY_STEP = ["eval_steps=1", "save_steps=1", "logging_steps=1"]


@bug_on_unpatched
def test_patience_ends_training_and_the_run_still_finishes(tmp_path):
    # a threshold no evaluation beats: the second evaluation is the first without improvement
    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=10", *EVERY_STEP, "early_stopping_patience=1", "early_stopping_threshold=100",
                       launcher=False))  # fmt: skip
    result = summary(out)
    assert (result["steps"], result["stopped_early"], result["interrupted"]) == (2, True, False)
    assert (out / "final" / "config.json").is_file() and sorted(eval_losses(out)) == [1, 2]


@bug_on_unpatched
def test_the_best_checkpoint_is_kept_and_becomes_final(tmp_path):
    # greater_is_better on the loss makes the worst (earliest) model the best: never the last one
    from safetensors.torch import load_file

    out = tmp_path / "run"
    settings = ["max_steps=4", *EVERY_STEP, "load_best_model_at_end=true", "greater_is_better=true"]
    assert_ok(run_demo(out, *settings, "save_total_limit=1", launcher=False))
    losses = eval_losses(out)
    best = max(losses, key=losses.get)
    assert best != 4
    result = summary(out)
    assert result["final_model_step"] == best and result["best_step"] == best
    assert result["eval_loss"] == pytest.approx(losses[best], rel=1e-5)  # evaluated again, on the best weights
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == [f"step-{best}", "step-4"]
    final, kept = (
        load_file(out / "final/model.safetensors"),
        load_file(out / f"checkpoints/step-{best}/model.safetensors"),
    )
    assert all(torch.equal(final[name], kept[name]) for name in kept)


@bug_on_unpatched
def test_early_stopping_continues_exactly_after_a_resume(tmp_path):
    settings = ["max_steps=12", *EVERY_STEP, "early_stopping_patience=3", "early_stopping_threshold=0.15"]
    whole, resumed = tmp_path / "whole", tmp_path / "resumed"
    assert_ok(run_demo(whole, *settings, launcher=False))
    stop = summary(whole)["steps"]
    assert summary(whole)["stopped_early"] and stop < 12
    # interrupted a step before the stop, where the patience counter is 2: the resumed run must carry it
    assert_ok(run_demo(resumed, *settings, f"stop_after_steps={stop - 1}", launcher=False))
    assert_ok(run_demo(resumed, *settings, "resume_from_checkpoint=latest", launcher=False))
    keys = ("steps", "stopped_early", "best_step", "best_metric", "eval_loss")
    assert {k: summary(resumed)[k] for k in keys} == {k: summary(whole)[k] for k in keys}
    # a run that stopped early, resumed from its last checkpoint, stays stopped (it trained on to step 11 on 4.53)
    assert_ok(run_demo(whole, *settings, "resume_from_checkpoint=latest", launcher=False))
    assert summary(whole)["steps"] == stop and summary(whole)["stopped_early"]


@pytest.mark.parametrize(
    "settings, message",
    [
        (["early_stopping_threshold=0.1"], "early_stopping_threshold: set, but early_stopping_patience is 0"),
        (["early_stopping_patience=2", "eval_strategy=no"], "early_stopping_patience: needs evaluations"),
        (["load_best_model_at_end=true", "metric_for_best_model=accuracy"], "metric_for_best_model: 'accuracy' is"),
    ],
)
def test_settings_that_cannot_work_are_refused_by_name(tmp_path, settings, message):
    result = run_demo(tmp_path / "run", "max_steps=2", *settings, launcher=False)
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "settings, message",
    [
        (["load_best_model_at_end=true", "save_strategy=epoch"], "load_best_model_at_end requires the save and eval"),
        (["early_stopping_patience=-1"], "early_stopping_patience: -1 is negative"),  # it stopped after a step
        (["early_stopping_patience=2", "early_stopping_threshold=-0.1"], "early_stopping_threshold: -0.1 is negative"),
    ],
)
def test_values_refused_while_the_config_is_parsed(tmp_path, settings, message):
    # before the accelerator state matters: on the published release too
    result = run_demo(tmp_path / "run", "max_steps=2", *settings, launcher=False)
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr


def test_rotation_keeps_the_best_and_the_newest(tmp_path):
    from tpu_demo.training.checkpoint import rotate_checkpoints

    for step in (1, 2, 3, 4, 5):
        (tmp_path / "checkpoints" / f"step-{step}").mkdir(parents=True)
    rotate_checkpoints(tmp_path, 2, keep=2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-2", "step-5"]
    rotate_checkpoints(tmp_path, 1, keep=2)  # a limit of 1 still keeps the newest, to resume from
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-2", "step-5"]


def test_patience_counts_evaluations_without_a_large_enough_improvement():
    from tpu_demo.training.best_model import BestModel

    best = BestModel("loss", greater_is_better=False, patience=2, threshold=0.1)
    for step, loss in enumerate([1.0, 0.95, 0.5, 0.45, 0.44], 1):
        best.evaluated({"eval_loss": loss}, step)
        best.saved(step)
    # 0.95 and 0.45 and 0.44 improve by less than 0.1: waited 1, then reset by 0.5, then 1, 2
    assert best.should_stop and (best.best_step, best.best_metric) == (5, 0.44) and best.best_checkpoint() == 5


@bug_on_unpatched
def test_an_early_stop_ends_with_samples_of_the_final_model_and_says_why(tmp_path):
    # the end samples were skipped whenever max_steps was a multiple of sample_every, however early the run stopped
    pytest.importorskip("soundfile")
    from tests.demo_utils import tiny_codec

    out = tmp_path / "run"
    settings = ["max_steps=8", *EVERY_STEP, "early_stopping_patience=1", "early_stopping_threshold=100",
                f"codec={tiny_codec(tmp_path / 'codec')}", 'sample_prompts=["[S1] Hi."]', "sample_every=4",
                "sample_max_frames=4"]  # fmt: skip
    result = run_demo(out, *settings, launcher=False)
    assert_ok(result)
    assert summary(out)["samples"] == ["samples/step-2"] and (out / "samples/step-2/prompt-1.wav").is_file()
    assert "tpu_demo: stopped early at step 2: eval_loss did not improve by more than 100" in result.stdout
