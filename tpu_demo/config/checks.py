"""Every refusal of a setting against another setting, the launch, or what is installed, in one place. The launcher
runs `check_config` before any process starts, and every process again before it builds `TrainingArguments`; the
recipe then reads a valid config. What depends on a file's contents (a model folder, a recording) is refused where
the file is read."""

import dataclasses
import difflib
import importlib.util
from types import SimpleNamespace

from accelerate.utils import parse_flag_from_env
from transformers import TrainingArguments
from transformers.trainer_pt_utils import AcceleratorConfig

from tpu_demo.config.arguments import (
    ARGUMENT_CLASSES,
    EXISTING_STATES,
    HONOURED_TRAINING_ARGUMENTS,
    MOVED_TRAINING_ARGUMENTS,
    SAMPLING,
    STRATEGIES,
    FineTuneConfig,
    field_default,
    is_default,
    numbers_typed,
)
from tpu_demo.config.prompts import check_prompts
from tpu_demo.errors import FineTuneError

OPTIMIZERS = ("adamw_torch", "adamw_torch_fused", "adafactor", "sgd")
LORA_UNSHARDED = (
    "lora_r: LoRA is not sharded by this fine-tuner (docs/MEMORY_1_6B.md: where LoRA fits unsharded): set sharding: no"
)


def settings(raw: dict) -> FineTuneConfig:
    """The config as `parse_all` gives it, except `training`: `TrainingArguments`' field defaults with the config's
    values, not a `TrainingArguments` (building one sets up a device, which the launcher must leave to its
    processes)."""
    from transformers import HfArgumentParser

    typed = numbers_typed(raw)
    parts = HfArgumentParser(ARGUMENT_CLASSES[:-1]).parse_dict(typed, allow_extra_keys=True)
    defaults = {f.name: field_default(f) for f in dataclasses.fields(TrainingArguments)}
    values = {key: str(getattr(value, "value", value)) if key.endswith("strategy") else value
              for key, value in (defaults | typed).items() if key in defaults}  # fmt: skip
    return FineTuneConfig(*parts, SimpleNamespace(**values))


def check_config(raw: dict) -> None:
    """Names the first key no dataclass has, the first setting that contradicts another, or that needs what is not
    installed."""
    refuse_unknown_keys(raw)
    refuse_unused_training_arguments(raw)
    config = settings(raw)
    data, evaluation, samples, lora = config.data, config.evaluation, config.samples, config.lora
    args = config.training
    if data.eval_samples == 0 and args.eval_strategy != "no":
        raise FineTuneError(f"eval_strategy: {args.eval_strategy} needs held-out samples (eval_samples: 0)")
    if "pad_to_multiple_of" in raw and data.length_buckets == 1:
        raise FineTuneError("pad_to_multiple_of: set, but length_buckets is 1 (every batch at the maxima)")
    if evaluation.early_stopping_patience and args.eval_strategy == "no":
        raise FineTuneError("early_stopping_patience: needs evaluations (eval_strategy: steps or epoch)")
    if evaluation.early_stopping_threshold and not evaluation.early_stopping_patience:
        raise FineTuneError("early_stopping_threshold: set, but early_stopping_patience is 0")
    if "eval_asr_samples" in raw and not (evaluation.eval_asr_model or evaluation.eval_speaker_model):
        raise FineTuneError(
            "eval_asr_samples: set, but there is no eval_asr_model or eval_speaker_model to score with"
        )
    if "eval_voice_takes" in raw and not evaluation.eval_speaker_model:
        raise FineTuneError("eval_voice_takes: set, but there is no eval_speaker_model to compare voices with")
    for key in ("eval_asr_model", "eval_speaker_model"):
        if getattr(evaluation, key) and not data.codec:
            raise FineTuneError(f"{key}: needs `codec` (the DacModel that turns generated codes into audio)")
    if evaluation.eval_speaker_model and not data.eval_samples:
        raise FineTuneError(
            "eval_speaker_model: needs held-out recordings (eval_samples: 0): they are the reference voices"
        )
    metric, reported = best_model_metric(config), reported_metrics(config)
    if metric and (metric if metric.startswith("eval_") else f"eval_{metric}") not in reported:
        names = ", ".join(name.removeprefix("eval_") for name in reported)
        raise FineTuneError(f"metric_for_best_model: {metric!r} is not a metric the evaluation reports ({names})")
    refuse_sample_conflicts(samples, data)
    if not config.recordings.recordings:
        refuse_settings_while_off(config.recordings, "recordings", "there are no recordings to cut (recordings)")
    elif data.dataset == "synthetic":
        raise FineTuneError("recordings: set `dataset` to the new folder their clips are written to and trained from")
    refuse_lora_conflicts(lora, config)
    optim = str(getattr(args.optim, "value", args.optim))
    if optim not in OPTIMIZERS:
        supported = ", ".join(OPTIMIZERS)
        raise FineTuneError(f"optim: {optim!r} is not supported by this fine-tuner; use one of {supported}")
    trackers(args.report_to)


def refuse_sample_conflicts(samples, data) -> None:
    if not samples.sample_prompts:
        refuse_settings_while_off(samples, "sample_prompts", "there are no sample_prompts to generate")
        return
    if not data.codec:
        raise FineTuneError("sample_prompts: needs `codec` (the DacModel that turns generated codes into audio)")
    from transformers import DiaTokenizer  # Dia's byte tokenizer: no file to read

    check_prompts(samples.sample_prompts, DiaTokenizer(), data.max_text_tokens)


def refuse_lora_conflicts(lora, config: FineTuneConfig) -> None:
    if not lora.lora_r:
        refuse_settings_while_off(lora, "lora_r", "lora_r is 0 (full fine-tuning)")
        return
    if config.launch.sharding == "fsdp" or parse_flag_from_env("ACCELERATE_USE_FSDP"):
        raise FineTuneError(LORA_UNSHARDED)
    if not config.model.model:
        raise FineTuneError(
            "lora_r: LoRA trains adapters over a base model: set `model` (adapters over the tiny random Dia could "
            "never be loaded again)"
        )
    if importlib.util.find_spec("peft") is None:
        raise FineTuneError("lora_r: LoRA needs PEFT (pip install peft)")


def refuse_launch_conflicts(launch, distributed_type: str, accelerate_version: str) -> None:
    """The launch plan against the machine: `distributed_type` is the config's, or what `auto` found here."""
    if launch.num_machines > 1 and distributed_type not in ("MULTI_CPU", "MULTI_GPU", "XLA"):
        raise FineTuneError(
            f"num_machines: {launch.num_machines} machines need distributed_type MULTI_GPU, MULTI_CPU or XLA (the "
            f"hosts of a TPU pod slice), not {distributed_type}"
        )
    if distributed_type == "XLA":
        fields = {f.name: f for f in dataclasses.fields(launch)}
        pjrt_decides = ("machine_rank", "main_process_ip", "rdzv_backend")
        changed = [key for key in pjrt_decides if not is_default(fields[key], getattr(launch, key))]
        if changed:
            raise FineTuneError(
                f"{changed[0]}: not on XLA: PJRT joins and numbers a pod slice's hosts; every host runs the same "
                "command"
            )
    elif launch.num_machines > 1 and not launch.main_process_ip:
        raise FineTuneError(
            f"num_machines: {launch.num_machines} machines need main_process_ip (the address of machine 0)"
        )
    if launch.sharding == "fsdp" and distributed_type not in ("MULTI_GPU", "XLA"):
        found = " (what `auto` found here)" if launch.distributed_type == "auto" else ""
        raise FineTuneError(
            f"sharding: fsdp needs GPUs (distributed_type MULTI_GPU) or XLA devices, not {distributed_type}{found}: "
            f"accelerate {accelerate_version} has no sharded path on CPU processes; without sharding, use lora_r or "
            "a smaller model"
        )


def refuse_unknown_keys(raw: dict) -> None:
    """Keys none of the dataclasses has, named."""
    known = {f.name for cls in ARGUMENT_CLASSES for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(raw) - known)
    if "model_dir" in unknown:
        raise FineTuneError(
            "model_dir: now `model` (a local folder of Dia weights in transformers format, or a hub id)"
        )
    if "data_dir" in unknown:
        raise FineTuneError("data_dir: now `dataset` (a manifest of recordings, a folder of codes, or synthetic)")
    if "pause_db" in unknown or "target_dbfs" in unknown:
        raise FineTuneError(
            "pause_db, target_dbfs: the segmenter now finds pauses with Silero VAD (`vad_threshold`) and sets "
            "loudness in LUFS (`target_lufs`, ITU-R BS.1770)"
        )
    if "accelerator_state_policy" in unknown:
        raise FineTuneError(
            "accelerator_state_policy: now `accelerator_config: {existing_state: auto}` (or preserve, reset)"
        )
    if unknown:
        raise FineTuneError(f"unknown config keys: {', '.join(unknown)}{nearest_known(unknown, known)}")


def nearest_known(unknown: list[str], known: set[str]) -> str:
    """A hint naming the known key closest to the first unknown one that has a close match: a typo, or a key
    written in the singular."""
    for key in unknown:
        if close := difflib.get_close_matches(key, sorted(known), n=1):
            return f" (did you mean `{close[0]}` for {key}?)" if len(unknown) > 1 else f" (did you mean `{close[0]}`?)"
    return ""


def refuse_unused_training_arguments(raw: dict) -> None:
    fields = TrainingArguments.__dataclass_fields__
    for key, value in raw.items():
        if key not in fields or key in HONOURED_TRAINING_ARGUMENTS or is_default(fields[key], value):
            continue
        if key in MOVED_TRAINING_ARGUMENTS:
            raise FineTuneError(f"{key}: not read by this fine-tuner; use {MOVED_TRAINING_ARGUMENTS[key]}")
        raise FineTuneError(f"{key}: a TrainingArguments setting this fine-tuner does not apply; remove it")
    for key in ("eval_strategy", "save_strategy"):
        if str(raw.get(key, "no")) not in STRATEGIES:
            raise FineTuneError(f"{key}: {raw[key]!r} is not one of {', '.join(STRATEGIES)}")
    if str(raw.get("train_sampling_strategy", "random")) not in SAMPLING:
        given = raw["train_sampling_strategy"]
        raise FineTuneError(f"train_sampling_strategy: {given!r} is not one of {', '.join(SAMPLING)} here")
    refuse_accelerator_config(raw.get("accelerator_config"))


def refuse_accelerator_config(given) -> None:
    """`accelerator_config` is read for its `existing_state` only (what `TrainingArguments` do with the Accelerator's
    state, #40376); its other keys set up the Trainer's Accelerator, which the fine-tune does not build."""
    if given is None:
        return
    if not isinstance(given, dict):
        raise FineTuneError(f"accelerator_config: a mapping here ({{existing_state: auto}}), not {given!r}")
    if others := sorted(set(given) - {"existing_state"}):
        raise FineTuneError(
            f"accelerator_config: {', '.join(others)}: not read by this fine-tuner, whose Accelerator follows the "
            "launch; only existing_state is"
        )
    if "existing_state" in given and "existing_state" not in AcceleratorConfig.__dataclass_fields__:
        raise FineTuneError(
            "accelerator_config: existing_state: this transformers has no such setting; it comes with the fix for "
            "huggingface/transformers#40376 (install the patched transformers: `tox -e demo`)"
        )
    if given.get("existing_state", "auto") not in EXISTING_STATES:
        states = ", ".join(EXISTING_STATES)
        raise FineTuneError(f"accelerator_config: existing_state: {given['existing_state']!r} is not one of {states}")


def refuse_settings_while_off(arguments, switch: str, why_off: str) -> None:
    """Refuses the fields of `arguments` other than `switch` set to something else than their default: settings that
    would be ignored while `switch` is off (`why_off` says how it is off)."""
    given = [
        f.name
        for f in dataclasses.fields(arguments)
        if f.name != switch and not is_default(f, getattr(arguments, f.name))
    ]
    if given:
        raise FineTuneError(f"{', '.join(given)}: set, but {why_off}")


def best_model_metric(config) -> str | None:
    """`metric_for_best_model`, or the loss when early stopping needs one and none is named."""
    return config.training.metric_for_best_model or ("loss" if config.evaluation.early_stopping_patience else None)


def spoken_held_out(config) -> bool:
    """Whether evaluations speak held-out texts: to transcribe them, or to compare their voices."""
    evaluation = config.evaluation
    scorer = evaluation.eval_asr_model or evaluation.eval_speaker_model
    return bool(scorer and evaluation.eval_asr_samples and config.data.eval_samples)


def reported_metrics(config) -> list[str]:
    """What an evaluation reports: the loss; the error rates and the voice figures where held-out texts are spoken."""
    evaluation, spoken = config.evaluation, spoken_held_out(config)
    rates = ["eval_cer", "eval_wer"] if spoken and evaluation.eval_asr_model else []
    voice = ["eval_speaker_similarity"] if spoken and evaluation.eval_speaker_model else []
    stability = ["eval_voice_stability"] if voice and evaluation.eval_voice_takes >= 2 else []
    return ["eval_loss", *rates, *voice, *stability]


def trackers(report_to) -> list[str]:
    """`report_to` as accelerate trackers: `none`, `all` (every installed one), or names, each of which must be
    one accelerate knows and installed (accelerate would drop a missing one with a log line only)."""
    from accelerate.tracking import _available_trackers
    from accelerate.utils import LoggerType

    available = [str(getattr(t, "value", t)) for t in _available_trackers]
    names = [report_to] if isinstance(report_to, str) else list(report_to or [])
    if names in ([], ["none"]):
        return []
    if names == ["all"]:
        return available
    known = sorted(str(t.value) for t in LoggerType if t.value != "all")
    if unknown := [name for name in names if name not in known]:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        raise FineTuneError(
            f"report_to: {', '.join(unknown)} is no tracker accelerate knows"
            + (f" (did you mean `{close[0]}`?)" if close else f" ({', '.join(known)})")
        )
    missing = [name for name in names if name not in available]
    if missing:
        raise FineTuneError(
            f"report_to: {', '.join(missing)} not installed here (pip install {' '.join(missing)}); "
            f"installed trackers: {', '.join(available) or 'none'}"
        )
    return names


def train_sampling(args) -> str:
    """The order training draws samples in (`SAMPLING`), from whichever key the release's `TrainingArguments` has."""
    if getattr(args, "group_by_length", False):
        return "group_by_length"
    return str(getattr(args, "train_sampling_strategy", "random"))
