"""One YAML file for everything: the program's own settings, accelerate's, and `TrainingArguments`."""

import dataclasses
import typing
from dataclasses import dataclass, field

from transformers import TrainingArguments

from tpu_demo.errors import FineTuneError


class CheckedChoices:
    def __post_init__(self):
        for f in dataclasses.fields(self):  # parse_dict does not apply argparse's choices
            choices = f.metadata.get("choices")
            if choices and getattr(self, f.name) not in choices:
                raise FineTuneError(f"{f.name}: {getattr(self, f.name)!r} is not one of {', '.join(choices)}")


@dataclass
class LaunchArguments(CheckedChoices):
    """What `accelerate launch` needs; `tpu_demo.launch` turns these into its flags."""

    distributed_type: str = field(
        default="auto",
        metadata={
            "help": "auto, NO, MULTI_CPU, MULTI_GPU or XLA",
            "choices": ["auto", "NO", "MULTI_CPU", "MULTI_GPU", "XLA"],
        },
    )
    num_processes: int = field(default=1, metadata={"help": "processes per machine"})
    num_machines: int = field(
        default=1,
        metadata={
            "help": "machines, each running the same launch with its own machine_rank; on XLA, the hosts of a TPU "
            "pod slice, each running the same launch (PJRT joins and numbers them)"
        },
    )
    machine_rank: int = field(
        default=0, metadata={"help": "this machine's rank, 0 (at main_process_ip) to num_machines - 1"}
    )
    main_process_ip: str | None = field(
        default=None,
        metadata={"help": "address of machine 0 that every machine reaches; needed with num_machines > 1"},
    )
    rdzv_backend: str = field(
        default="static",
        metadata={
            "help": "torchrun rendezvous of several machines: static (machine_rank as given) or c10d (assigned)",
            "choices": ["static", "c10d"],
        },
    )
    mixed_precision: str = field(
        default="no", metadata={"help": "no, fp16 or bf16", "choices": ["no", "fp16", "bf16"]}
    )
    main_process_port: int | None = field(default=None, metadata={"help": "rendezvous port for several processes"})
    sharding: str = field(
        default="no",
        metadata={
            "help": "no: every device holds the whole model (DDP; on XLA, SPMD data parallel); fsdp: weights, "
            "gradients and optimizer state sharded over the devices (GPUs: accelerate's FSDP2 plugin; XLA: torch_xla "
            "SPMD, FSDPv2 style)",
            "choices": ["no", "fsdp"],
        },
    )

    def __post_init__(self):
        super().__post_init__()
        if not 0 <= self.machine_rank < self.num_machines:
            raise FineTuneError(f"machine_rank: {self.machine_rank} is not in 0..{self.num_machines - 1}")


@dataclass
class ModelArguments(CheckedChoices):
    model: str | None = field(
        default=None,
        metadata={
            "help": "Dia weights in transformers format: a local folder (e.g. a snapshot of nari-labs/Dia-1.6B-0626) "
            "or a hub id; unset: a tiny random Dia, for tests and the demo only"
        },
    )
    dtype: str = field(
        default="float32",
        metadata={
            "help": "dtype the weights are loaded in; keep float32 with `mixed_precision: bf16` for autocast",
            "choices": ["float32", "bfloat16", "float16"],
        },
    )
    tiny_hidden_size: int = field(default=64, metadata={"help": "hidden size of the tiny random Dia"})
    tiny_layers: int = field(default=2, metadata={"help": "encoder and decoder layers of the tiny random Dia"})


@dataclass
class DataArguments(CheckedChoices):
    dataset: str = field(
        default="synthetic",
        metadata={
            "help": "recordings: a manifest (CSV, |-separated or JSON lines with audio and text columns, LJSpeech, "
            "an audiofolder) or its folder, or a `datasets` folder; a folder of pre-computed codes (metadata.jsonl); "
            "or `synthetic` (written under output_dir)"
        },
    )
    audio_dir: str | None = field(
        default=None,
        metadata={
            "help": "the folder a manifest's audio paths are relative to (default: the manifest's folder; LJSpeech: "
            "its wavs/)"
        },
    )
    codec: str | None = field(
        default=None,
        metadata={
            "help": "DacModel folder (or hub id) that turns a manifest's audio into codes and generated codes into "
            "audio; `tiny`: a random tiny DAC (16 kHz) for the demo, so its final/ speaks (noise) without the hub"
        },
    )
    cache_dir: str | None = field(
        default=None, metadata={"help": "where encoded audio is cached, by content and codec (default: output_dir)"}
    )
    too_long: str = field(
        default="drop",
        metadata={
            "help": "audio longer than max_audio_frames: drop, or truncate (its first frames with the whole "
            "transcript: only where the words fit in them)",
            "choices": ["drop", "truncate"],
        },
    )
    synthetic_samples: int = field(default=96, metadata={"help": "how many samples `dataset: synthetic` makes"})
    eval_samples: int = field(default=13, metadata={"help": "samples held out for evaluation, drawn with the seed"})
    max_text_tokens: int = field(
        default=512,
        metadata={
            "help": "text tokens a sample may have (a longer transcript is cut, or dropped from a manifest); "
            "512: Dia-1.6B's"
        },
    )
    max_audio_frames: int = field(
        default=1720,
        metadata={
            "help": "audio frames a sample may have (longer audio: too_long); the largest batch shape; 1720: "
            "Dia-1.6B's 20 s"
        },
    )
    length_buckets: int | None = field(
        default=None,
        metadata={
            "help": "0: each batch padded to its longest text and audio (rounded up to pad_to_multiple_of); N: each "
            "to the smallest of N fixed lengths that holds it, length k being k/N of max_text_tokens "
            "(max_audio_frames): XLA compiles for at most N x N shapes; 1: every batch at the maxima. Default: 4 "
            "on XLA and with torch_compile, 0 elsewhere; 1 on transformers 4.x"
        },
    )
    pad_to_multiple_of: int = field(
        default=8, metadata={"help": "a batch's padded text and audio lengths are multiples of this (1: exact)"}
    )
    text_dropout: float = field(default=0.1, metadata={"help": "chance to drop the text (classifier-free guidance)"})
    stateful_dataloader: bool = field(
        default=True, metadata={"help": "resume mid-epoch through torchdata's StatefulDataLoader when installed"}
    )
    audio_prompts: float = field(
        default=0.0,
        metadata={
            "help": "share of training clips preceded by another training clip of the same speaker and its "
            "transcript, the loss on it masked: what `generate --audio_prompt` continues (voice cloning); 0: none"
        },
    )
    audio_prompt_max_frames: int = field(
        default=0,
        metadata={
            "help": "audio frames a prompt may have, on top of max_audio_frames (a longer prompt, or one whose "
            "transcript would not fit in max_text_tokens with the clip's, is not used); needed with audio_prompts"
        },
    )
    stop_after_steps: int = field(
        default=0, metadata={"help": "stop (as if interrupted) after this many optimizer steps; 0: run to the end"}
    )

    def __post_init__(self):
        super().__post_init__()
        for name in ("text_dropout", "audio_prompts"):
            if not 0 <= getattr(self, name) <= 1:
                raise FineTuneError(f"{name}: {getattr(self, name)} is not a share between 0 and 1")
        if self.audio_prompts and self.audio_prompt_max_frames <= 0:
            raise FineTuneError("audio_prompt_max_frames: needed with audio_prompts (the frames a prompt may have)")
        if self.audio_prompt_max_frames and not self.audio_prompts:
            raise FineTuneError("audio_prompt_max_frames: set, but audio_prompts is 0")
        if self.length_buckets is not None and self.length_buckets < 0:
            raise FineTuneError(f"length_buckets: {self.length_buckets} is not 0 (the longest of each batch) or more")
        if self.pad_to_multiple_of < 1:
            raise FineTuneError(f"pad_to_multiple_of: {self.pad_to_multiple_of} is not 1 or more")


@dataclass
class RecordingsArguments:
    recordings: str | None = field(
        default=None,
        metadata={
            "help": "a folder of long recordings (any format and rate soundfile reads; a subfolder per speaker; "
            "NAME.txt beside NAME.wav: what is said in it): `python -m tpu_demo.segment` cuts them into clips at "
            "pauses, transcribes and filters them, and writes the dataset into `dataset` (a new folder), which "
            "training then reads"
        },
    )
    segment_asr_model: str | None = field(
        default=None,
        metadata={
            "help": "the speech recogniser that transcribes the clips: a transformers folder or hub id (Whisper, "
            "wav2vec2), or `pocketsphinx` (English, installed with the `speech` extra); default eval_asr_model; none "
            "needed where every recording has its English text"
        },
    )
    segment_language: str | None = field(
        default=None,
        metadata={
            "help": "the recordings' language, e.g. de: the dataset's `language` column (a [de] tag before each "
            "text; none for English, en or en-*, which Dia learned untagged), and the language a Whisper recogniser "
            "transcribes in (unset: it detects one per clip)"
        },
    )
    min_clip_seconds: float = field(default=1.0, metadata={"help": "shorter clips are dropped"})
    max_clip_seconds: float = field(
        default=15.0, metadata={"help": "clips are cut at pauses to at most this long; speech without such a pause is "
                                "dropped"}
    )  # fmt: skip
    skip_recordings: list[str] | None = field(
        default=None,
        metadata={"help": "recordings to leave out, by name relative to the folder (e.g. anna/take3.wav)"},
    )
    min_pause_seconds: float = field(
        default=0.25, metadata={"help": "the shortest stretch without speech (Silero VAD) that is a pause"}
    )
    vad_threshold: float = field(
        default=0.5, metadata={"help": "Silero VAD's speech probability above which a 32 ms frame is speech"}
    )
    min_snr_db: float = field(
        default=20.0,
        metadata={
            "help": "pieces of speech less than this many dB above the noise in the pauses around them (the nearest "
            "0.3 s or more of pause within 3 s, else 15 s, else the recording's) are dropped"
        },
    )
    min_dnsmos_bak: float = field(
        default=1.8,
        metadata={"help": "pieces whose DNSMOS background score (1-5: 5 is no audible noise) is lower are dropped"},
    )
    min_dnsmos_ovrl: float = field(
        default=1.3,
        metadata={"help": "pieces whose DNSMOS overall score (1-5) is lower are dropped (distortion, music)"},
    )
    min_speaker_similarity: float = field(
        default=0.75,
        metadata={
            "help": "pieces whose voice (GE2E speaker encoder) is less similar than this to the rest of their speaker "
            "folder (or recording) are dropped as another voice"
        },
    )
    max_clipped_share: float = field(
        default=0.001,
        metadata={"help": "pieces with more of their samples held flat at full scale (clipping) are dropped"},
    )
    target_lufs: float = field(
        default=-20.0,
        metadata={"help": "each clip is scaled to this integrated loudness (ITU-R BS.1770), peaks kept below -1 dBFS"},
    )
    pace_tolerance: float = field(
        default=2.0,
        metadata={
            "help": "clips spoken this many times faster or slower (seconds per character) than the data's median "
            "are dropped"
        },
    )
    max_asr_cer: float = field(
        default=0.5,
        metadata={
            "help": "with a recording's own text in another language than English (English texts are aligned by "
            "pocketsphinx instead): clips whose transcript differs from the text split over them by more than this "
            "character error rate are dropped"
        },
    )
    train_on_unchecked_text: bool = field(
        default=False,
        metadata={
            "help": "clips of recordings without their text carry the recogniser's transcript, unchecked: by default "
            "they go to review.csv beside metadata.csv, to proofread (correct a text, or write yes in its `checked` "
            "column, and run again: it joins metadata.csv), unless min_asr_confidence trusts them; true: they go to "
            "metadata.csv as they are"
        },
    )
    min_asr_confidence: float = field(
        default=0.5,
        metadata={
            "help": "a transformers recogniser's transcript (Whisper, wav2vec2) goes to metadata.csv, not review.csv, "
            "when the recogniser gave every token of its words at least this probability (0.5: each more likely "
            "than all others together); 1: none is trusted. pocketsphinx gives no probability: its clips are "
            "reviewed"
        },
    )

    def __post_init__(self):
        for name in ("min_clip_seconds", "min_pause_seconds", "max_clipped_share", "max_asr_cer"):
            if getattr(self, name) < 0:
                raise FineTuneError(f"{name}: {getattr(self, name)} is negative")
        if self.max_clip_seconds <= self.min_clip_seconds:
            raise FineTuneError(
                f"max_clip_seconds: {self.max_clip_seconds} is not more than min_clip_seconds {self.min_clip_seconds}"
            )
        if not 0 <= self.min_asr_confidence <= 1:
            raise FineTuneError(f"min_asr_confidence: {self.min_asr_confidence} is not a probability between 0 and 1")
        if self.pace_tolerance <= 1:
            raise FineTuneError(f"pace_tolerance: {self.pace_tolerance} must be more than 1 (a factor)")
        if not 0 < self.vad_threshold < 1:
            raise FineTuneError(f"vad_threshold: {self.vad_threshold} is not a probability between 0 and 1")


@dataclass
class LossArguments:
    codebook_weights: list[float] | None = field(
        default=None, metadata={"help": "one weight per codebook, e.g. [4, 1, 1, 1, 1, 1, 1, 1, 1]; default uniform"}
    )
    loss_on_audio_tokens_only: bool = field(
        default=False, metadata={"help": "count only audio code targets in the loss, not EOS"}
    )


def check_sampling(overrides: dict) -> None:
    """Refuses what transformers' Dia generation would change without a word."""
    temperature, top_k = overrides.get("temperature"), overrides.get("top_k")
    if temperature is not None and temperature < 1:
        raise FineTuneError(
            f"temperature {temperature}: transformers' Dia generation raises a temperature below 1 to 1; use 1 or "
            "more, or top_k 1 for greedy decoding"
        )
    if top_k is not None and top_k < 1:
        raise FineTuneError(f"top_k {top_k}: keep at least 1 candidate (1: greedy decoding)")


@dataclass
class SampleArguments:
    sample_prompts: list[str] | None = field(
        default=None,
        metadata={
            "help": "texts to speak during training, each a text or a mapping {text, speaker, language}; needs `codec`"
        },
    )
    sample_every: int = field(default=0, metadata={"help": "optimizer steps between samples (and at the end); 0: end"})
    sample_max_frames: int = field(default=0, metadata={"help": "audio frames to generate; 0: max_audio_frames"})
    guidance_scale: float | None = field(
        default=None, metadata={"help": "classifier-free guidance; default: the model's generation config, else 3.0"}
    )
    temperature: float | None = field(default=None, metadata={"help": "default: the model's, else 1.8"})
    top_p: float | None = field(default=None, metadata={"help": "default: the model's, else 0.90"})
    top_k: int | None = field(default=None, metadata={"help": "default: the model's, else 45; 1: greedy decoding"})

    def __post_init__(self):
        check_sampling(self.sampling_overrides())  # now, not when the first sample is due

    def sampling_overrides(self) -> dict:
        return {"guidance_scale": self.guidance_scale, "temperature": self.temperature, "top_p": self.top_p,
                "top_k": self.top_k}  # fmt: skip


@dataclass
class LoraArguments:
    lora_r: int = field(default=0, metadata={"help": "LoRA rank; 0: full fine-tuning. Needs `model` and PEFT"})
    lora_alpha: int = field(default=16, metadata={"help": "LoRA scaling numerator (scale = alpha / r)"})
    lora_dropout: float = field(default=0.0, metadata={"help": "dropout on the LoRA branch, between 0 and 1"})
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
        metadata={"help": "Linear layers that get adapters (Dia: q/k/v/o_proj, gate_up_proj, down_proj)"},
    )
    merge_lora: bool = field(default=False, metadata={"help": "final/ holds merged weights instead of the adapter"})

    def __post_init__(self):
        if self.lora_r < 0:
            raise FineTuneError(f"lora_r: {self.lora_r} is not a rank (0: full fine-tuning)")
        if not 0 <= self.lora_dropout <= 1:
            raise FineTuneError(f"lora_dropout: {self.lora_dropout} is not a share between 0 and 1")


@dataclass
class EvaluationArguments:
    early_stopping_patience: int = field(
        default=0,
        metadata={
            "help": "stop after this many evaluations without an improvement of metric_for_best_model (as the "
            "Trainer's EarlyStoppingCallback); 0: never"
        },
    )
    early_stopping_threshold: float = field(
        default=0.0, metadata={"help": "how much better the metric must get to count as an improvement"}
    )
    eval_asr_model: str | None = field(
        default=None,
        metadata={
            "help": "a transformers speech-recognition model (folder or hub id, e.g. a Whisper): samples are "
            "transcribed and their CER/WER logged; evaluations add eval_cer/eval_wer on held-out texts. Needs `codec` "
            "and jiwer"
        },
    )
    eval_asr_samples: int = field(
        default=4,
        metadata={
            "help": "held-out texts each evaluation speaks, to transcribe (eval_asr_model) and to compare voices "
            "(eval_speaker_model); 0: none"
        },
    )
    eval_speaker_model: str | None = field(
        default=None,
        metadata={
            "help": "a transformers speaker-verification (x-vector) model, folder or hub id (e.g. a WavLM "
            "ForXVector): the speaker similarity of samples to the held-out recordings of their speaker is logged; "
            "evaluations add eval_speaker_similarity and eval_voice_stability. Needs `codec` and eval_samples"
        },
    )
    eval_voice_takes: int = field(
        default=3,
        metadata={
            "help": "times the first held-out text is spoken (independent draws) for eval_voice_stability: the mean "
            "speaker similarity of every pair of takes (eval_speaker_model); below 2: not measured"
        },
    )

    def __post_init__(self):
        for name in ("early_stopping_patience", "early_stopping_threshold", "eval_asr_samples", "eval_voice_takes"):
            if getattr(self, name) < 0:
                raise FineTuneError(f"{name}: {getattr(self, name)} is negative")


@dataclass
class FineTuneConfig:
    """The one YAML file, parsed: each part is one of the dataclasses above, `training` the `TrainingArguments`."""

    launch: LaunchArguments
    model: ModelArguments
    data: DataArguments
    recordings: RecordingsArguments
    loss: LossArguments
    samples: SampleArguments
    lora: LoraArguments
    evaluation: EvaluationArguments
    training: TrainingArguments


ARGUMENT_CLASSES = tuple(part.type for part in dataclasses.fields(FineTuneConfig))

# The `TrainingArguments` fields the fine-tune reads (tpu_demo/training/, tpu_demo/runtime/accelerator.py). Any
# other one set to a value other than its default is refused by name: nothing is accepted and ignored.
HONOURED_TRAINING_ARGUMENTS = {
    "output_dir", "seed", "accelerator_config", "resume_from_checkpoint",
    "per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps",
    "max_steps", "num_train_epochs", "learning_rate", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
    "max_grad_norm", "optim", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio",
    "logging_steps", "eval_strategy", "eval_steps", "save_strategy", "save_steps", "save_total_limit", "report_to",
    "dataloader_num_workers", "dataloader_pin_memory", "gradient_checkpointing", "activation_checkpointing",
    "torch_compile", "load_best_model_at_end", "metric_for_best_model", "greater_is_better",
    "group_by_length", "train_sampling_strategy",  # 4.x's and 5.x's key for the same: whichever the release has
}  # fmt: skip
# Settings that belong to another key here.
MOVED_TRAINING_ARGUMENTS = {
    "bf16": "mixed_precision: bf16",
    "fp16": "mixed_precision: fp16",
    "use_cpu": "distributed_type: NO (and no accelerator visible), or run without a GPU",
    "evaluation_strategy": "eval_strategy",
}
STRATEGIES = ("no", "steps", "epoch")
SAMPLING = ("random", "sequential", "group_by_length")  # the train_sampling_strategy values applied
# What `TrainingArguments` do with the Accelerator's state (#40376, the patched release): the one key of
# `accelerator_config` honoured; the others set up the Trainer's Accelerator, which the fine-tune does not build.
EXISTING_STATES = ("auto", "preserve", "reset")


SWITCH_SPELLINGS = {"true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}


def numbers_typed(raw: dict) -> dict:
    """Numbers written as YAML 1.1 reads them as text (`1e-4`, a string there) become numbers, and a whole number for
    one of this program's float settings that float (20 is min_snr_db 20.0, in the caches' keys too); a switch is
    true or false (or yes, no, 1, 0); one text for one of its lists of texts is that list's one item; a value that is
    none is refused by its key before anything long starts (the dataclasses do not convert, the loop would fail)."""
    hints, ours = {}, set()
    for cls in ARGUMENT_CLASSES:
        hints.update(typing.get_type_hints(cls))
        ours |= set() if issubclass(cls, TrainingArguments) else {item.name for item in dataclasses.fields(cls)}
    typed = dict(raw)
    for key, value in raw.items():
        kinds = [kind for kind in typing.get_args(hints.get(key)) or [hints.get(key)] if kind is not type(None)]
        if key in ours and isinstance(value, str) and list[str] in (hints[key], *kinds):
            typed[key] = [value]  # a list of its characters otherwise
        if kinds == [bool] and value is not None and not isinstance(value, bool):  # `flase`, a text, was true
            if str(value).lower() not in SWITCH_SPELLINGS:
                raise FineTuneError(f"{key}: {value!r} is not true or false")
            typed[key] = SWITCH_SPELLINGS[str(value).lower()]
            continue
        if kinds not in ([int], [float]) or value is None:
            continue
        number = kinds[0]
        try:
            if isinstance(value, bool):
                raise ValueError
            typed[key] = number(value) if isinstance(value, str) or (number is float and key in ours) else value
            if number is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
        except ValueError:
            raise FineTuneError(
                f"{key}: {value!r} is not {'a whole number' if number is int else 'a number'}"
            ) from None
    return typed


def field_default(field_):
    return field_.default_factory() if field_.default_factory is not dataclasses.MISSING else field_.default


def is_default(field_, value) -> bool:
    default = field_default(field_)
    return value == default or value == getattr(default, "value", default)
