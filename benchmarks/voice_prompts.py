"""Prompt-conditioned training (`audio_prompts`) measured: does a fine-tuned Dia say a text in the voice of the audio
prompt it is given?

Two espeak-ng voices say the same short texts. A small Dia (hidden 128, 4+4 layers) memorises every clip, once with
`audio_prompts: 1.0` and once without. Then each text is generated greedily after a prompt of each voice (that voice
saying another text), and the codes it says are compared with each voice's codes of the text: a model that follows
its prompt says the prompt voice's codes. With `--speaker_model` (a real x-vector model, e.g. a snapshot of
microsoft/wavlm-base-plus-sv) it also prints each generation's speaker similarity to both voices.

    python -m benchmarks.voice_prompts [--steps 400] [--speaker_model FOLDER]
"""

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from tpu_demo.cli import refuse_unsupported_transformers

TEXTS = ["[S1] One.", "[S1] Two.", "[S1] Three.", "[S1] Four."]
VOICES = {"high": "en+f3", "low": "en+m3"}
RATE = 16000  # the tiny codec's


def recordings(folder: Path) -> Path:
    """Each voice saying each text, as a manifest with a speaker column."""
    import soundfile
    import soxr

    espeak = shutil.which("espeak-ng")
    if not espeak:
        sys.exit("benchmarks.voice_prompts: needs espeak-ng (apt install espeak-ng)")
    folder.mkdir(parents=True)
    lines = ["audio,text,speaker"]
    for voice, espeak_voice in VOICES.items():
        for number, text in enumerate(TEXTS):
            path = folder / f"{voice}-{number}.wav"
            subprocess.run([espeak, "-v", espeak_voice, "-w", str(path), text.split("] ")[1]], check=True)
            audio, rate = soundfile.read(path, dtype="float32")
            soundfile.write(path, soxr.resample(audio, rate, RATE), RATE)
            lines.append(f'{path.name},"{text}",{voice}')
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n")
    return folder / "metadata.csv"


def train(run: Path, manifest: Path, codec: Path, steps: int, prompts: bool) -> None:
    settings = [f"output_dir={run}", f"dataset={manifest}", f"codec={codec}", "eval_samples=0", "eval_strategy=no",
                "save_strategy=no", f"max_steps={steps}", "per_device_train_batch_size=8", "max_audio_frames=96",
                "max_text_tokens=48", "warmup_steps=20", "logging_steps=100", "tiny_hidden_size=128", "tiny_layers=4",
                "text_dropout=0.0", "report_to=none"]  # fmt: skip
    if prompts:
        settings += ["audio_prompts=1.0", "audio_prompt_max_frames=96"]
    config = Path(__file__).resolve().parents[1] / "tpu_demo/configs/tiny.yaml"
    subprocess.run([sys.executable, "-m", "tpu_demo.train", str(config), *settings], check=True)


def agreement(generated, reference) -> float:
    """The share of the reference's codes (all codebooks) generated equal; a missing frame counts as wrong."""
    length = min(len(generated), len(reference))
    return float((generated[:length] == reference[:length]).sum()) / reference.numel()


def measure(run: Path, clips: Path, voices_model) -> dict:
    from tpu_demo.data.audio import load_audio
    from tpu_demo.evaluation.samples import decode, generate_codes, generation_settings, spoken_codes
    from tpu_demo.generate import find_processor, load_model

    model = load_model(run / "final", None)
    processor = find_processor(run / "final", None)
    settings = generation_settings(model, {"top_k": 1, "guidance_scale": 1})  # the model's own most likely codes

    def codes_of(path):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        (found,) = run.glob(f"audio_codes/*/{digest}.pt")
        return torch.load(found, weights_only=True)

    found = {"prompt voice": [], "other voice": [], "follows": [], "similarity": []}
    for voice in VOICES:
        other = next(v for v in VOICES if v != voice)
        for number, text in enumerate(TEXTS):
            prompt_number = (number + 1) % len(TEXTS)  # the same voice saying another text
            prompt, _ = load_audio(clips / f"{voice}-{prompt_number}.wav", RATE)
            mine, theirs = codes_of(clips / f"{voice}-{number}.wav"), codes_of(clips / f"{other}-{number}.wav")
            codes, prompt_len = generate_codes(
                model, processor, [text], max(len(mine), len(theirs)) + 20, settings, prompt, TEXTS[prompt_number]
            )
            said = spoken_codes(codes[0], model.config.delay_pattern, int(prompt_len))
            same, different = agreement(said, mine), agreement(said, theirs)
            found["prompt voice"].append(same)
            found["other voice"].append(different)
            found["follows"].append(same > different)
            if voices_model is not None:
                audio = decode(processor, said)
                references = {v: decode(processor, codes_of(clips / f"{v}-{number}.wav")) for v in VOICES}
                found["similarity"].append([similarity(voices_model, audio, references[v]) for v in (voice, other)])
    return found


def similarity(voices_model, audio, reference) -> float:
    from tpu_demo.evaluation.voice import cosine

    a, b = voices_model.embed(audio, RATE), voices_model.embed(reference, RATE)
    return 0.0 if a is None or b is None else cosine(a, b)


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.voice_prompts", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--speaker_model", help="a speaker-verification (x-vector) model folder")
    args = parser.parse_args(argv)
    voices_model = None
    if args.speaker_model:
        from tpu_demo.evaluation.voice import Voices

        voices_model = Voices(args.speaker_model)
    from transformers import DacModel

    from tpu_demo.model.dia import tiny_codec_config

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        manifest = recordings(root / "clips")
        torch.manual_seed(0)
        codec = root / "codec"
        DacModel(tiny_codec_config()).save_pretrained(codec)
        for prompts in (False, True):
            run = root / ("prompted" if prompts else "plain")
            train(run, manifest, codec, args.steps, prompts)
            found = measure(run, root / "clips", voices_model)
            pairs = len(found["follows"])
            mine, theirs = sum(found["prompt voice"]) / pairs, sum(found["other voice"]) / pairs
            line = (
                f"audio_prompts {'1.0' if prompts else '0  '}: codes equal to the prompt voice's {mine:.3f}, to the "
                f"other voice's {theirs:.3f}; closer to the prompt voice in {sum(found['follows'])}/{pairs} of them"
            )
            if found["similarity"]:
                same = sum(s for s, _ in found["similarity"]) / pairs
                other = sum(o for _, o in found["similarity"]) / pairs
                line += f"; speaker similarity to the prompt voice {same:.3f}, to the other {other:.3f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
