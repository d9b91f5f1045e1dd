"""Every `TrainingArguments` key a config may carry is honoured by the fine-tune or refused by name (in-process)."""

import pytest
import torch

from tests.demo_utils import assert_ok, run_demo, summary
from tests.testing_utils import ROOT, bug_on_unpatched, require_dia

pytestmark = require_dia


def parse(**raw):
    from tpu_demo.config.load import parse_all

    return parse_all({"output_dir": "unused", "report_to": "none", **raw})


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("label_smoothing_factor", 0.1, "label_smoothing_factor: a TrainingArguments setting this fine-tuner"),
        ("eval_on_start", True, "eval_on_start: a TrainingArguments setting"),
        ("save_only_model", True, "save_only_model: a TrainingArguments setting"),  # load_best_model_at_end: honoured
        ("bf16", True, "bf16: not read by this fine-tuner; use mixed_precision: bf16"),
        ("fp16", True, "fp16: not read by this fine-tuner; use mixed_precision: fp16"),
        ("eval_strategy", "best", "eval_strategy: 'best' is not one of no, steps, epoch"),
        ("torch_compile_mode", "max-autotune", "torch_compile_mode: a TrainingArguments setting"),
    ],
)
def test_unused_training_argument_is_refused_by_name(key, value, message):
    from tpu_demo.errors import FineTuneError

    with pytest.raises(FineTuneError, match=message):
        parse(**{key: value})


@pytest.mark.parametrize("key, value", [("bf16", False), ("label_smoothing_factor", 0.0), ("eval_strategy", "no")])
def test_a_default_value_is_not_refused(key, value):
    parse(**{key: value})


@pytest.mark.parametrize("state", ["auto", "preserve", "reset", "keep"])
def test_existing_state_reaches_training_arguments(state):
    from transformers.trainer_pt_utils import AcceleratorConfig

    from tpu_demo.errors import FineTuneError

    if "existing_state" not in AcceleratorConfig.__dataclass_fields__:  # the published release
        with pytest.raises(FineTuneError, match="existing_state: this transformers has no such setting; .*#40376"):
            parse(accelerator_config={"existing_state": state})
    elif state == "keep":
        with pytest.raises(FineTuneError, match="existing_state: 'keep' is not one of auto, preserve, reset"):
            parse(accelerator_config={"existing_state": state})
    else:
        assert parse(accelerator_config={"existing_state": state}).training.accelerator_config.existing_state == state


def test_every_honoured_key_is_read_by_the_program():
    """A key on the honoured list that no module of the fine-tune reads would be accepted and ignored."""
    from tpu_demo.config.arguments import HONOURED_TRAINING_ARGUMENTS

    source = "".join(p.read_text() for p in ROOT.joinpath("tpu_demo").rglob("*.py"))
    # read through another name: accelerator_config's existing_state by TrainingArguments itself, warmup by its helper
    readers = {
        "accelerator_config": "config = parse_all(raw)",
        "warmup_steps": "args.get_warmup_steps",
        "warmup_ratio": "args.get_warmup_steps",
        "report_to": "trackers(training.report_to)",
        "metric_for_best_model": "config.training.metric_for_best_model",
        "output_dir": "args.output_dir",
        "torch_compile": 'raw.get("torch_compile")',  # for the Accelerator, made before TrainingArguments
        "gradient_checkpointing": 'getattr(args, "gradient_checkpointing"',
        "activation_checkpointing": 'getattr(args, "activation_checkpointing"',
        "group_by_length": 'getattr(args, "group_by_length"',
        "train_sampling_strategy": 'getattr(args, "train_sampling_strategy"',
    }
    unread = [key for key in HONOURED_TRAINING_ARGUMENTS if readers.get(key, f"args.{key}") not in source]
    assert not unread


@pytest.mark.parametrize("optim", ["adamw_torch", "adamw_torch_fused", "adafactor", "sgd"])
def test_optim_builds_the_named_optimizer_without_decay_on_biases_and_norms(optim):
    from accelerate.utils import DistributedType

    from tpu_demo.training.optimization import make_optimizer

    args = parse(optim=optim, weight_decay=0.1, learning_rate=0.5).training
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    optimizer = make_optimizer(args, model, DistributedType.NO)
    expected = {"adamw_torch": "AdamW", "adamw_torch_fused": "AdamW", "adafactor": "Adafactor", "sgd": "SGD"}
    assert type(optimizer).__name__ == expected[optim]
    assert bool(optimizer.defaults.get("fused")) == (optim == "adamw_torch_fused")
    decayed, plain = optimizer.param_groups
    assert [p.shape for p in decayed["params"]] == [(4, 4)] and decayed["weight_decay"] == 0.1
    assert len(plain["params"]) == 3 and plain["weight_decay"] == 0.0
    assert all(group["lr"] == 0.5 for group in optimizer.param_groups)


def test_fused_adamw_runs_unfused_on_xla():
    from accelerate.utils import DistributedType

    from tpu_demo.training.optimization import make_optimizer

    args = parse(optim="adamw_torch_fused").training
    assert not make_optimizer(args, torch.nn.Linear(2, 2), DistributedType.XLA).defaults["fused"]


def test_an_optimizer_the_loop_does_not_build_is_refused():
    from tpu_demo.errors import FineTuneError

    with pytest.raises(FineTuneError, match="optim: 'adamw_bnb_8bit' is not supported"):
        parse(optim="adamw_bnb_8bit")


@pytest.mark.parametrize("report_to", ["wandb", ["tensorboard", "comet_ml"]])
def test_a_tracker_that_is_not_installed_is_named(report_to, monkeypatch):
    import accelerate.tracking

    from tpu_demo.config.checks import trackers
    from tpu_demo.errors import FineTuneError

    monkeypatch.setattr(accelerate.tracking, "_available_trackers", ["tensorboard"])
    with pytest.raises(FineTuneError, match="not installed here"):
        trackers(report_to)
    assert trackers("all") == ["tensorboard"] and trackers("none") == [] and trackers(["tensorboard"])


def test_split_is_random_with_the_seed():
    from tpu_demo.data.codes import split

    train, held_out = split(50, 7, seed=1)
    assert sorted(train + held_out) == list(range(50)) and len(held_out) == 7
    assert split(50, 7, seed=1) == (train, held_out) and split(50, 7, seed=2)[1] != held_out
    assert held_out != list(range(43, 50))


def test_rotation_keeps_the_newest_checkpoints(tmp_path):
    from tpu_demo.training.checkpoint import rotate_checkpoints

    for step in (2, 4, 10, 6):
        (tmp_path / "checkpoints" / f"step-{step}").mkdir(parents=True)
    rotate_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-10", "step-6"]


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
@pytest.mark.filterwarnings("error:.*checkpointing.*:FutureWarning")
def test_activation_checkpointing_by_its_current_name_warns_of_nothing(tmp_path):
    from transformers import TrainingArguments

    if "activation_checkpointing" not in TrainingArguments.__dataclass_fields__:
        pytest.skip("transformers before 5.23 has gradient_checkpointing only")
    out = tmp_path / "run"
    assert_ok(run_demo(out, "max_steps=1", "eval_strategy=no", "activation_checkpointing=true", launcher=False))
    assert summary(out)["gradient_checkpointing"]  # read from the model


@bug_on_unpatched  # building TrainingArguments resets the Accelerator made first
def test_torch_compile_compiles_the_model_as_for_the_trainer(tmp_path):
    # it stopped at the first step: TrainingArguments asked for inductor, the Accelerator made first had no compiler
    from torch._dynamo.utils import counters
    from transformers import DiaForConditionalGeneration

    counters.clear()
    run = ("max_steps=2", "eval_steps=2", "save_steps=2", "load_best_model_at_end=true", "torch_compile=true")
    assert_ok(run_demo(tmp_path / "run", *run, launcher=False))
    assert counters["stats"]["unique_graphs"] > 0
    # the weights under the model's own names: `_orig_mod.` ones were loaded as missing, the model left random
    _, loading = DiaForConditionalGeneration.from_pretrained(tmp_path / "run/final", output_loading_info=True)
    assert not any(loading.values()), loading


@bug_on_unpatched  # building TrainingArguments resets the Accelerator made first
@pytest.mark.parametrize("output_dir", [None, "run"])
def test_the_accelerator_follows_the_parsed_settings(tmp_path, monkeypatch, output_dir):
    # make_accelerator restated TrainingArguments' defaults: without `output_dir` the Accelerator's directory was
    # `outputs` while the arguments wrote to `trainer_output`
    from tests.testing_utils import accelerate_environment_cleared
    from tpu_demo.runtime.accelerator import make_accelerator

    monkeypatch.chdir(tmp_path)
    raw = {"report_to": "none", "gradient_accumulation_steps": 3, **({"output_dir": output_dir} if output_dir else {})}
    with accelerate_environment_cleared():
        try:
            accelerator, config, _ = make_accelerator(raw)
            assert accelerator.project_dir == config.training.output_dir == (output_dir or "trainer_output")
            assert accelerator.logging_dir == config.training.output_dir
            assert accelerator.gradient_accumulation_steps == 3 == config.training.gradient_accumulation_steps
            assert accelerator.log_with == []
        finally:
            from accelerate.state import AcceleratorState, GradientState

            AcceleratorState._reset_state(True)
            GradientState._reset_state()
