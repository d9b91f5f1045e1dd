"""Speak with a fine-tuned Dia: a run's `final/`, one of its checkpoints, or a LoRA adapter over its base model.

    python -m tpu_demo.generate outputs/dia-tiny/final "[S1] Hello there." --out hello.wav
    python -m tpu_demo.generate DIR "[S1] More." --audio_prompt me.wav --audio_prompt_text "[S1] What I say in it."
    python -m tpu_demo.generate DIR "[S1] Me?" --speaker_model wavlm-base-plus-sv --reference me.wav --reference 2.wav

Runs on the best local device as accelerate picks it (CPU or GPU); on a TPU/XLA machine on its host CPU.
"""

import argparse
import json
import sys
from pathlib import Path

import torch

from tpu_demo.cli import fail, refuse_unsupported_transformers, say
from tpu_demo.config.arguments import check_sampling
from tpu_demo.config.prompts import check_prompts
from tpu_demo.errors import FineTuneError
from tpu_demo.evaluation.samples import (
    DIA_SAMPLING,
    generate_checked,
    generation_device,
    generation_settings,
    write_wav,
)
from tpu_demo.outputs import settings_path
from tpu_demo.training.checkpoint import read_sharded_weights, sharded_checkpoint

UNKNOWN_RUN_FRAMES = 1720  # the default without the run's settings: 20 s at the 44.1 kHz DAC's 86 frames per second


def find_processor(model_dir: Path, given: str | None):
    """`--processor`, else the model folder (a run's final/), else the run's processor/ beside its checkpoints: the
    first that transformers loads a `DiaProcessor` from."""
    from tpu_demo.model.processor import load_processor

    candidates = [Path(given)] if given else [model_dir, model_dir.parent.parent / "processor"]
    reasons = []
    for folder in candidates:
        if not folder.is_dir():
            reasons.append(f"{folder.resolve()} does not exist")
            continue
        try:
            return load_processor(folder)
        except FineTuneError as error:
            reasons.append(str(error))
    raise FineTuneError(
        f"no DiaProcessor: {'; '.join(reasons)}. Pass --processor (a run's final/ or processor/ folder; a run saves "
        "one when it has a `codec`)"
    )


def load_model(model_dir: Path, base_model: str | None):
    from transformers import DiaForConditionalGeneration

    if (model_dir / "adapter_config.json").is_file():
        from tpu_demo.model.lora import load_adapter

        return load_adapter(model_dir, base_model)
    if base_model:
        raise FineTuneError(f"--base_model is for LoRA adapters; {model_dir} holds a whole model")
    if not (model_dir / "config.json").is_file():
        raise FineTuneError(
            f"{model_dir} is not a Dia model folder (no config.json): give a run's final/ or a checkpoint"
        )
    if sharded_checkpoint(model_dir):  # a sharded run's checkpoint: its parts, read in this one process
        from transformers import DiaConfig, GenerationConfig

        model = DiaForConditionalGeneration(DiaConfig.from_pretrained(model_dir))
        model.generation_config = GenerationConfig.from_pretrained(model_dir)
        read_sharded_weights(model, model_dir)
        return model.eval()
    from safetensors import SafetensorError

    try:
        model = DiaForConditionalGeneration.from_pretrained(model_dir)
    except (SafetensorError, OSError, ValueError) as error:  # a truncated or overwritten weights file
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise FineTuneError(
            f"{model_dir}: its weights cannot be read ({first}): the file is damaged; a run's checkpoints/step-N/ "
            "holds another copy"
        ) from None
    if not all(bool(torch.isfinite(parameter).all()) for parameter in model.parameters()):
        raise FineTuneError(
            f"{model_dir}: its weights hold NaN or inf (a damaged file, or a run whose loss diverged): use an earlier "
            "checkpoint (checkpoints/step-N/)"
        )
    return model


def output_paths(out: Path, count: int) -> list[Path]:
    return [out] if count == 1 else [out.with_name(f"{out.stem}-{n}{out.suffix}") for n in range(1, count + 1)]


def positive(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} is not a positive number of frames")
    return number


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="tpu_demo.generate", description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", help="a run's final/, a checkpoint, or a LoRA adapter folder")
    parser.add_argument("texts", nargs="+", help="what to say, e.g. '[S1] Hello. [S2] Hi!'")
    parser.add_argument("--out", default="generated.wav", help="WAV file (several texts: NAME-1.wav, NAME-2.wav...)")
    parser.add_argument("--processor", help="DiaProcessor folder, when the model folder has none")
    parser.add_argument("--base_model", help="the Dia model a LoRA adapter was trained on (default: as recorded)")
    parser.add_argument("--audio_prompt", help="a clip whose voice the audio continues")
    parser.add_argument("--audio_prompt_text", help="the transcript of --audio_prompt (required with it)")
    parser.add_argument(
        "--speaker_model",
        help="a speaker-verification (x-vector) model folder, as eval_speaker_model: each WAV's speaker similarity to "
        "the --reference clips is printed (default: the run's eval_speaker_model, when it had one)",
    )
    parser.add_argument(
        "--reference", action="append", help="a clip of the voice to compare with (repeat it; default: --audio_prompt)"
    )
    parser.add_argument(
        "--max_new_tokens",
        type=positive,
        help="audio frames at most (default: the run's max_audio_frames, the longest audio it trained on, plus the "
        f"codebooks' delay, 15 for Dia; without the run's {settings_path('').name}, {UNKNOWN_RUN_FRAMES}: 20 s at the "
        "44.1 kHz DAC's 86 frames per second; a codec's frames per second are its sampling rate / hop length)",
    )
    parser.add_argument("--seed", type=int, default=0)
    for key, default in DIA_SAMPLING.items():
        greedy = "; 1: greedy decoding" if key == "top_k" else ""
        parser.add_argument(f"--{key}", type=type(default), help=f"default: the model's, else {default}{greedy}")
    args = parser.parse_args(argv)
    try:
        written = generate(args)
    except FineTuneError as error:
        fail(error)
    for path, seconds, problems, similarity in written:
        voice = "" if similarity is None else f", speaker similarity {similarity:.3f}"
        print(f"{path} ({seconds:.2f} s{voice})")
        if problems:  # what a listener would notice, said before anyone has to listen
            say(f"warning: {path} looks broken: {'; '.join(problems)}", file=sys.stderr)
    return 0


def run_record(model_dir: Path, name: str) -> dict:
    """The model's run's `name` (summary.json, settings.json), beside final/ or above checkpoints/step-N; empty when
    it is not there (a model from elsewhere, or a run older than the file)."""
    for record in (model_dir.parent / name, model_dir.parent.parent / name):
        if record.is_file():
            try:
                return json.loads(record.read_text())
            except json.JSONDecodeError:
                return {}
    return {}


def training_seconds_per_char(model_dir: Path):
    """The range of seconds per character of the data the model was trained on, from its run's summary.json; None
    when it is not there."""
    return run_record(model_dir, "summary.json").get("data_seconds_per_char")


def default_max_frames(run: dict, model) -> int:
    """As long as the run's samples may be: the longest audio it trained on and the delayed codebooks' tail (a
    longer budget only gives a model that misses its EOS more time to babble)."""
    frames = run.get("max_audio_frames")
    return frames + max(model.config.delay_pattern) if frames else UNKNOWN_RUN_FRAMES


def speaker_model(args, run: dict) -> str | None:
    """`--speaker_model`, else the run's `eval_speaker_model` while it is there (a copied run may have left it)."""
    if args.speaker_model:
        return args.speaker_model
    recorded = run.get("eval_speaker_model")
    if recorded and Path(recorded).is_absolute() and not Path(recorded).is_dir():
        say(f"warning: the run's eval_speaker_model {recorded} is not here: no speaker similarity", file=sys.stderr)
        return None
    return recorded


def reference_voices(args, run: dict):
    """`Voices` with the reference clips' voice (one speaker), or None without a speaker model or, for the run's,
    without a voice to compare with."""
    from tpu_demo.data.audio import load_audio
    from tpu_demo.evaluation.voice import Voices

    references = args.reference or ([args.audio_prompt] if args.audio_prompt else [])
    model = speaker_model(args, run) if args.speaker_model or references else None
    if not model:
        if args.reference:
            raise FineTuneError(
                "--reference: set, but there is no --speaker_model (nor a run's eval_speaker_model) to compare voices "
                "with"
            )
        return None
    if not references:
        raise FineTuneError("--speaker_model: needs --reference clips (or an --audio_prompt) of the voice to compare")
    missing = [clip for clip in references if not Path(clip).is_file()]
    if missing:
        raise FineTuneError(f"--reference {missing[0]} does not exist")
    voices = Voices(model)
    rate = voices.extractor.sampling_rate
    voices.add_references([(None, load_audio(clip, rate)[0], rate) for clip in references])
    return voices


def generate(args) -> list[tuple[Path, float, list[str], float | None]]:
    from tpu_demo.data.audio import load_audio

    model_dir = Path(args.model_dir)
    if not model_dir.is_dir():
        raise FineTuneError(f"{model_dir} does not exist")
    overrides = {key: getattr(args, key) for key in DIA_SAMPLING}
    check_sampling(overrides)
    if bool(args.audio_prompt) != bool(args.audio_prompt_text):
        raise FineTuneError("--audio_prompt and --audio_prompt_text go together: the clip and what is said in it")
    if (model_dir / "final").is_dir() and not (model_dir / "config.json").is_file():
        raise FineTuneError(
            f"{model_dir} is a run's output folder: give {model_dir / 'final'} or one of its checkpoints"
        )
    run = run_record(model_dir, settings_path("").name)
    voices = reference_voices(args, run)  # before the model: a wrong clip is told at once
    processor = find_processor(model_dir, args.processor)
    model = load_model(model_dir, args.base_model).to(generation_device())
    texts = check_prompts(args.texts, processor.tokenizer, model.config.encoder_config.max_position_embeddings)
    rate = processor.feature_extractor.sampling_rate
    prompt = None
    if args.audio_prompt:
        if not Path(args.audio_prompt).is_file():
            raise FineTuneError(f"--audio_prompt {args.audio_prompt} does not exist")
        prompt, _ = load_audio(args.audio_prompt, rate)
    frames = args.max_new_tokens or default_max_frames(run, model)
    torch.manual_seed(args.seed)
    results = generate_checked(
        model, processor, texts, frames, generation_settings(model, overrides), prompt,
        args.audio_prompt_text or "", training_seconds_per_char(model_dir),
    )  # fmt: skip
    written = []
    for path, (clip, health) in zip(output_paths(Path(args.out), len(texts)), results, strict=True):
        write_wav(path, clip, rate)
        similarity = voices.similarity(clip, rate) if voices else None
        written.append((path, len(clip) / rate, health["problems"], similarity))
    return written


if __name__ == "__main__":
    sys.exit(main())
