"""What segmenting is sized by: the clip length training keeps (`max_audio_frames` at the codec's frame rate), the
text it keeps (`max_text_tokens`), the recogniser; the dataset folder's file names, and the settings a dataset was
cut with (training refuses a dataset not cut from its recordings with these).
"""

import dataclasses
import difflib
import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path

from tpu_demo.cli import say
from tpu_demo.errors import FineTuneError
from tpu_demo.segmenting.read import recordings_digest

REPORT = "segment_report.json"  # in the dataset folder: every clip, kept or dropped, and what it was cut with
CORRECTIONS = "corrections.csv"  # the user's edits of metadata.csv texts, kept across reruns
REVIEW = "review.csv"  # kept clips whose text is a recogniser's, unchecked: to proofread, not trained on
PARTS = ".segmenting"  # one folder per recording: its stages' results, what makes a run resumable
DIA_TOKENS_PER_SECOND = 512 / 20  # Dia-1.6B's max_text_tokens over the seconds its max_audio_frames hold
SPOKEN_TOKENS_PER_SECOND = 16  # UTF-8 bytes a second of brisk English speech (about 190 words a minute)
DIA_CODEC = (44100, 512)  # Dia's codec, descript/dac_44khz: its rate and hop, where the YAML's codec cannot be read
PACKAGES = {"silero_vad": "silero-vad", "speechmos": "speechmos", "resemblyzer": "Resemblyzer"}


def recording_folder(out: Path, name: str) -> Path:
    """Where a recording's stage results are kept in the dataset folder `out`."""
    return out / PARTS / hashlib.sha256(name.encode()).hexdigest()[:16]


def sized_for_training(config, state):
    """The settings with clips no longer than training keeps whole (`max_audio_frames` of the same YAML), told."""
    if not config.recordings.recordings:
        raise FineTuneError("recordings: not set: name the folder of long recordings to cut into clips")
    asked = config.recordings.max_clip_seconds
    config = dataclasses.replace(config, recordings=clip_settings(config))
    if config.recordings.max_clip_seconds < asked and state.is_main_process:
        rate, codec = codec_frame_rate(config.data.codec)
        say(
            f"clips of at most {config.recordings.max_clip_seconds} s, what max_audio_frames "
            f"{config.data.max_audio_frames} holds at {rate:.2f} frames a second ({codec}); max_clip_seconds is "
            f"{asked}"
        )
    seconds, tokens = config.recordings.max_clip_seconds, config.data.max_text_tokens
    if tokens < seconds * SPOKEN_TOKENS_PER_SECOND and state.is_main_process:
        say(
            f"max_text_tokens {tokens} holds about {tokens / SPOKEN_TOKENS_PER_SECOND:.1f} s of speech "
            f"({SPOKEN_TOKENS_PER_SECOND} Dia tokens a second), clips are up to {seconds} s: clips are joined only "
            f"while their text fits, a piece whose text alone is longer is dropped; max_text_tokens: "
            f"{text_tokens_for(seconds)} fits {seconds} s clips"
        )
    return config


def segment_settings(recordings_args, asr_model: str) -> dict:
    """What the clips depend on besides the audio: every segmenting setting and the recogniser (not where the
    recordings are: a moved folder is the same recordings)."""
    return asdict(recordings_args) | {"segment_asr_model": asr_model, "recordings": None}


def settings_fingerprint(recordings_args, asr_model: str) -> str:
    settings = segment_settings(recordings_args, asr_model)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def recogniser(config) -> str:
    """The recogniser that transcribes the recordings without an aligned text; "" where the YAML names none (a run
    whose recordings all have their text needs none: `segment.refuse_without_recogniser`)."""
    name = config.recordings.segment_asr_model or config.evaluation.eval_asr_model
    if not name:
        return ""
    near = difflib.get_close_matches(name.lower(), ["pocketsphinx"], cutoff=0.75)
    if near and name != "pocketsphinx" and not Path(name).exists():  # before the hub is asked for it
        raise FineTuneError(f"segment_asr_model {name}: no such recogniser; did you mean `pocketsphinx`?")
    return name


def codec_frame_rate(codec: str | None) -> tuple[float, str]:
    """Code frames a second of the YAML's `codec` (its config.json: in its folder, or in the hub's cache for an id),
    and what it is, in words; Dia's DAC where the YAML names none or its config is not at hand."""
    from tpu_demo.model.dia import TINY_CODEC, tiny_codec_config

    if codec == TINY_CODEC:
        tiny = tiny_codec_config()
        return tiny.sampling_rate / tiny.hop_length, f"{codec}: {tiny.sampling_rate} Hz, hop {tiny.hop_length}"
    config = Path(codec) / "config.json" if codec else None
    if codec and not config.is_file():
        from huggingface_hub import try_to_load_from_cache

        try:
            cached = try_to_load_from_cache(codec, "config.json")
        except ValueError:  # not a hub id either
            cached = None
        config = Path(cached) if isinstance(cached, str) else None
    if config is not None and config.is_file():
        found = json.loads(config.read_text())
        if found.get("sampling_rate") and found.get("hop_length"):
            rate = found["sampling_rate"] / found["hop_length"]
            return rate, f"{codec}: {found['sampling_rate']} Hz, hop {found['hop_length']}"
    rate, hop = DIA_CODEC
    return rate / hop, f"Dia's DAC: {rate} Hz, hop {hop}" + (f"; {codec} not at hand" if codec else "")


def clip_settings(config):
    """The segmenting settings with `max_clip_seconds` no longer than the clips training keeps: what
    `max_audio_frames` holds at the frame rate of the YAML's codec (one frame spare: a codec rounds up)."""
    settings = config.recordings
    rate, codec = codec_frame_rate(config.data.codec)
    fits = int((config.data.max_audio_frames - 1) / rate * 100) / 100
    if fits >= settings.max_clip_seconds:
        return settings
    if fits <= settings.min_clip_seconds:
        frames, tokens = math.ceil(settings.max_clip_seconds * rate) + 1, text_tokens_for(settings.max_clip_seconds)
        raise FineTuneError(
            f"max_audio_frames {config.data.max_audio_frames} holds {fits:.2f} s at {rate:.2f} frames a second "
            f"({codec}), no more than min_clip_seconds {settings.min_clip_seconds}: for clips of up to "
            f"max_clip_seconds {settings.max_clip_seconds} set max_audio_frames: {frames} and max_text_tokens: "
            f"{max(tokens, config.data.max_text_tokens)} (Dia-1.6B's: 1720 and 512, 20 s)"
        )
    return dataclasses.replace(settings, max_clip_seconds=fits)


def text_tokens_for(seconds: float) -> int:
    """Dia tokens (UTF-8 bytes) that hold the text of `seconds` of fast speech, as Dia-1.6B's 512 hold 20 s; a
    multiple of 8."""
    return -(-round(seconds * DIA_TOKENS_PER_SECOND) // 8) * 8


def check_segmented(config) -> None:
    """Training on `recordings`: refuses a `dataset` not cut from them with these settings."""
    if not Path(config.recordings.recordings).is_dir():
        raise FineTuneError(f"recordings {config.recordings.recordings}: no such folder")
    report = Path(config.data.dataset) / REPORT
    found = json.loads(report.read_text()) if report.is_file() else {}
    settings = clip_settings(config)
    same = found.get("settings") == settings_fingerprint(settings, recogniser(config))
    if not (same and found.get("recordings_digest") == recordings_digest(config.recordings.recordings)):
        state = "cut from other recordings or settings than" if found else "not cut from recordings"
        now = json.loads(json.dumps(segment_settings(settings, recogniser(config))))  # as the report has it
        cut = found.get("segment_settings", {})
        changed = [key for key, value in now.items() if cut.get(key, value) != value]
        differ = [f"{key}: {cut[key]}, this config says {now[key]}" for key in changed]
        which = f" (it was cut with {'; '.join(differ)})" if differ else ""
        raise FineTuneError(
            f"dataset {config.data.dataset}: {state} {config.recordings.recordings}{which}: run `python -m "
            "tpu_demo.segment` with this config first"
        )


def missing_package(error: ImportError) -> str:
    """The pip name of the package an ImportError of this module means."""
    name = (error.name or "").split(".")[0]
    if name == "pkg_resources":  # webrtcvad, which Resemblyzer imports, needs setuptools' pkg_resources
        return "setuptools<81"
    return PACKAGES.get(name, name)
