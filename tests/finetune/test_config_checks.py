"""Every refusal of a setting is made by `check_config`, before any process starts: the launcher names it without
launching, and checking sets up no device (the launcher must leave the accelerator to its processes)."""

import re

import pytest

from tests.testing_utils import ROOT, accelerate_environment_cleared, require_dia

pytestmark = require_dia

CONFLICTS = [
    (["eval_samples=0", "eval_strategy=steps"], "eval_strategy: steps needs held-out samples (eval_samples: 0)"),
    (["early_stopping_threshold=0.1"], "early_stopping_threshold: set, but early_stopping_patience is 0"),
    (["early_stopping_patience=2", "eval_strategy=no"], "early_stopping_patience: needs evaluations"),
    (["metric_for_best_model=accuracy"], "metric_for_best_model: 'accuracy' is not a metric the evaluation reports"),
    (["metric_for_best_model=cer"], "metric_for_best_model: 'cer' is not a metric the evaluation reports (loss)"),
    (["eval_asr_samples=2"], "eval_asr_samples: set, but there is no eval_asr_model"),
    (["eval_asr_model=/nowhere/asr"], "eval_asr_model: needs `codec`"),
    (["eval_speaker_model=/nowhere/sv"], "eval_speaker_model: needs `codec`"),
    (["eval_voice_takes=4"], "eval_voice_takes: set, but there is no eval_speaker_model"),
    (
        ["eval_speaker_model=sv", "codec=dac", "eval_samples=0", "eval_strategy=no"],
        "eval_speaker_model: needs held-out recordings (eval_samples: 0)",
    ),
    (
        ["eval_speaker_model=sv", "codec=dac", "eval_voice_takes=1", "metric_for_best_model=voice_stability"],
        "metric_for_best_model: 'voice_stability' is not a metric the evaluation reports (loss, speaker_similarity)",
    ),
    (["sample_every=5"], "sample_every: set, but there are no sample_prompts"),
    (["sample_prompts=[hi]"], "sample_prompts: needs `codec`"),
    (["lora_alpha=4"], "lora_alpha: set, but lora_r is 0"),
    (["lora_r=4"], "lora_r: LoRA trains adapters over a base model: set `model`"),
    (["lora_r=4", "model=base/dia", "sharding=fsdp"], "lora_r: LoRA is not sharded by this fine-tuner"),
    (["optim=adamw_bnb_8bit"], "optim: 'adamw_bnb_8bit' is not supported by this fine-tuner"),
    (["report_to=[comet_ml]"], "report_to: comet_ml not installed here"),
    # a misspelt tracker was "not installed here (pip install tensorbord)": a package that does not exist
    (["report_to=tensorbord"], "report_to: tensorbord is no tracker accelerate knows (did you mean `tensorboard`?)"),
    (["fp16=true"], "fp16: not read by this fine-tuner; use mixed_precision: fp16"),
    (["unknown_key=1"], "unknown config keys: unknown_key"),
    (["audio_prompt=0.5"], "unknown config keys: audio_prompt (did you mean `audio_prompts`?)"),
    (["text_dropout=10"], "text_dropout: 10.0 is not a share between 0 and 1"),  # it was accepted
    (["lora_dropout=-0.1"], "lora_dropout: -0.1 is not a share between 0 and 1"),  # PEFT ran without dropout
    (["lora_r=-4"], "lora_r: -4 is not a rank (0: full fine-tuning)"),  # PEFT's traceback
    (["accelerator_state_policy=reset"], "accelerator_state_policy: now `accelerator_config: {existing_state: auto}`"),
    (["accelerator_config={split_batches: true}"], "accelerator_config: split_batches: not read by this fine-tuner"),
    (["accelerator_config=accelerate.json"], "accelerator_config: a mapping here ({existing_state: auto})"),
    (["length_buckets=1", "pad_to_multiple_of=64"], "pad_to_multiple_of: set, but length_buckets is 1"),
    (["length_buckets=-1"], "length_buckets: -1 is not 0 (the longest of each batch) or more"),
    (["pad_to_multiple_of=0"], "pad_to_multiple_of: 0 is not 1 or more"),
    # a misspelt switch was a non-empty text, so true: review.csv's unchecked transcripts went into training
    (["train_on_unchecked_text=flase"], "train_on_unchecked_text: 'flase' is not true or false"),
    (["gradient_checkpointing=ture"], "gradient_checkpointing: 'ture' is not true or false"),
]


@pytest.mark.parametrize("settings, message", CONFLICTS, ids=[message.split(":")[0] for _, message in CONFLICTS])
def test_the_launcher_refuses_before_any_process_starts(settings, message):
    from tpu_demo.errors import FineTuneError
    from tpu_demo.launch import accelerate_command

    with pytest.raises(FineTuneError, match=f"^{re.escape(message)}"):
        accelerate_command(str(ROOT / "tpu_demo/configs/tiny.yaml"), settings)


def test_checking_a_config_sets_up_no_device():
    from accelerate.state import PartialState

    from tpu_demo.config.checks import check_config
    from tpu_demo.config.load import load_raw

    with accelerate_environment_cleared():
        PartialState._reset_state()
        check_config(load_raw(ROOT / "tpu_demo/configs/tiny.yaml", ["load_best_model_at_end=true"]))
        assert PartialState._shared_state == {}


def test_the_shipped_configs_pass():
    from tpu_demo.config.checks import check_config
    from tpu_demo.config.load import load_raw

    for config in sorted((ROOT / "tpu_demo/configs").glob("*.yaml")):
        check_config(load_raw(config))


@pytest.mark.parametrize("given", ["[S1] Hello there.", '"[S1] Hello there."'], ids=["as_typed", "quoted"])
def test_one_sample_prompt_given_as_text_is_one_prompt(tmp_path, given):
    # a string was spoken one character at a time (13 prompts); unquoted on the command line, YAML's error ended it
    from tpu_demo.config.load import load_raw, parse_all

    config = parse_all(load_raw(ROOT / "tpu_demo/configs/tiny.yaml", ["codec=tiny", f"sample_prompts={given}"]))
    assert config.samples.sample_prompts == ["[S1] Hello there."]
    (tmp_path / "my.yaml").write_text('codec: tiny\nsample_prompts: "[S1] Hello there."\n')
    assert parse_all(load_raw(tmp_path / "my.yaml")).samples.sample_prompts == ["[S1] Hello there."]


def test_a_config_that_is_not_yaml_is_named_with_its_line(tmp_path):
    from tpu_demo.config.load import load_raw
    from tpu_demo.errors import FineTuneError

    (tmp_path / "my.yaml").write_text("max_steps: 10\nsample_prompts: [one, two\n")
    with pytest.raises(FineTuneError, match=r"my.yaml, line 3: not YAML \(expected ',' or '\]'"):
        load_raw(tmp_path / "my.yaml")


@pytest.mark.parametrize("spelling", ["group_by_length=true", "train_sampling_strategy=group_by_length"])
def test_either_releases_spelling_of_length_grouping_is_read(spelling):
    from tpu_demo.config.checks import train_sampling
    from tpu_demo.config.load import load_raw, parse_all

    with accelerate_environment_cleared():
        config = parse_all(load_raw(ROOT / "tpu_demo/configs/tiny.yaml", [spelling]))
    assert train_sampling(config.training) == "group_by_length"


def test_a_sampling_strategy_the_fine_tuner_does_not_apply_is_refused():
    from transformers import TrainingArguments

    from tpu_demo.config.checks import check_config
    from tpu_demo.config.load import load_raw
    from tpu_demo.errors import FineTuneError

    raw = load_raw(ROOT / "tpu_demo/configs/tiny.yaml", ["train_sampling_strategy=batch_rebalance"])
    on_5x = "train_sampling_strategy" in TrainingArguments.__dataclass_fields__
    expected = "train_sampling_strategy: 'batch_rebalance' is not one of" if on_5x else "unknown config keys"
    with pytest.raises(FineTuneError, match=re.escape(expected)):
        check_config(raw)


@pytest.mark.parametrize("command", ["launch", "segment"])
def test_a_flag_may_stand_between_the_config_and_the_overrides(command):
    # `launch my.yaml --segment dataset=clips` ended in argparse's "unrecognized arguments: dataset=clips"
    import importlib

    from tpu_demo.cli import config_parser

    module = importlib.import_module(f"tpu_demo.{command}")
    parser = config_parser(f"tpu_demo.{command}", module.__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(["my.yaml", "--dry-run", "dataset=clips", "num_processes=2"])
    assert (args.config, args.overrides, args.dry_run) == ("my.yaml", ["dataset=clips", "num_processes=2"], True)
