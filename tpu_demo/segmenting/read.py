"""The read stage: a recordings folder's recordings (a subfolder per speaker) and their own text (NAME.txt), and
each recording as the models hear it: 16 kHz mono, without DC, levelled (level is no fault).
"""

import hashlib
import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpu_demo.data.layouts import AUDIO_SUFFIXES
from tpu_demo.errors import FineTuneError

WINDOW = 0.02  # seconds: noise is measured on 20 ms windows
RATE = 16000
LEVEL_LUFS = -23.0  # what a piece is levelled to before the measures that depend on level


@dataclass
class Recording:
    path: Path
    name: str  # relative to the recordings folder, without its suffix: names its clips
    speaker: str | None  # its subfolder
    text: str | None  # NAME.txt beside it


def wav_truncation(path: Path) -> str | None:
    """For a WAV file whose data chunk claims more bytes than the file holds, what is missing; else None."""
    with open(path, "rb") as f:
        head = f.read(12)
        if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
            return None
        size = path.stat().st_size
        while chunk := f.read(8):
            if len(chunk) < 8:
                return None
            name, length = chunk[:4], struct.unpack("<I", chunk[4:])[0]
            if name == b"data":
                held = size - f.tell()
                return f"its header says {length} bytes of audio, the file holds {held}" if length > held else None
            f.seek(length + (length & 1), 1)
    return None


def find_recordings(folder, skip=()) -> tuple[list[Recording], dict[str, str]]:
    """Every recording in `folder` (a subfolder per speaker), and those that cannot be read, with why; `skip` names
    recordings (relative to `folder`) to leave out."""
    import soundfile

    folder = Path(folder)
    if not folder.is_dir():
        raise FineTuneError(f"recordings {folder}: no such folder")
    found, names, unreadable = [], {}, {}
    skip = {str(Path(name)) for name in skip or ()}
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file()):
        relative = path.relative_to(folder)
        if str(relative) in skip:
            continue
        name = str(relative.with_suffix(""))
        if name in names:
            raise FineTuneError(f"recordings: {names[name]} and {relative} would make clips of one name; rename one")
        names[name] = relative
        try:
            soundfile.info(str(path))
            problem = wav_truncation(path) if path.suffix.lower() == ".wav" else None
        except (soundfile.LibsndfileError, RuntimeError) as error:
            problem = f"unreadable audio ({str(error).splitlines()[-1].strip()})"
        if problem:
            unreadable[str(relative)] = problem if problem.startswith("unreadable") else f"truncated: {problem}"
            continue
        text_file = path.with_suffix(".txt")
        try:
            text = " ".join(text_file.read_text(encoding="utf-8-sig").split()) if text_file.is_file() else None
        except UnicodeDecodeError:
            raise FineTuneError(f"recordings: {text_file.relative_to(folder)} is not UTF-8 text") from None
        speaker = relative.parts[0] if len(relative.parts) > 1 else None
        found.append(Recording(path, name, speaker, text or None))
    if missed := sorted(name for name in skip if not (folder / name).is_file()):
        example = next(iter(names.values()), "speaker/take.wav")
        raise FineTuneError(
            f"skip_recordings: {', '.join(missed)} is no recording here (relative to {folder}, e.g. {example})"
        )
    if not found:
        raise FineTuneError(f"recordings {folder}: no readable audio files ({', '.join(AUDIO_SUFFIXES)})")
    return found, unreadable


def read_recording(path: Path) -> tuple[np.ndarray, np.ndarray, int]:
    """The recording as 16 kHz mono for the models, without DC and levelled to LEVEL_LUFS, each 10 ms window's count
    of samples at full scale (any channel, at its own rate, before any gain), and its rate; read block by block, so
    only the 16 kHz copy is ever whole in memory."""
    import soundfile
    import soxr

    rate = soundfile.info(str(path)).samplerate
    size = max(1, rate // 100)
    stream = soxr.ResampleStream(rate, RATE, 1, dtype="float32")
    audio, clipped = [], []
    blocks = soundfile.blocks(str(path), blocksize=size * 6000, dtype="float32", always_2d=True)
    for block in blocks:
        whole = len(block) // size * size
        clipped.append((np.abs(block[:whole]) >= 0.999).any(axis=1).reshape(-1, size).sum(axis=1))
        audio.append(stream.resample_chunk(block.mean(axis=1)))
    audio.append(stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
    audio16k = levelled(without_dc(np.concatenate(audio), RATE))  # level and DC are no faults: gone before judging
    return audio16k, np.concatenate(clipped or [np.zeros(0)]), rate


def window_power(audio16k: np.ndarray) -> np.ndarray:
    size = int(WINDOW * RATE)
    windows = audio16k[: len(audio16k) // size * size].reshape(-1, size).astype(np.float64)
    return np.mean(windows**2, axis=1)


def recordings_digest(folder) -> str:
    """Which recordings and texts a folder holds: their names and sizes (cheap to take again before training)."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (*AUDIO_SUFFIXES, ".txt") and p.is_file())
    listing = [(str(p.relative_to(folder)), p.stat().st_size) for p in files]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]


def to_model_rate(audio: np.ndarray, rate: int) -> np.ndarray:
    import soxr

    audio = np.ascontiguousarray(audio, dtype=np.float32)
    return audio if rate == RATE else soxr.resample(audio, rate, RATE).astype(np.float32)


def without_dc(audio: np.ndarray, rate: int) -> np.ndarray:
    """`audio` without its DC offset and what lies below 20 Hz (a zero-phase 2nd-order Butterworth high-pass): an
    offset is no fault of the speech, and in the pauses it would read as noise."""
    from scipy.signal import butter, sosfiltfilt

    if len(audio) < 64:
        return (audio - audio.mean(initial=0.0)).astype(np.float32)
    sos = butter(2, 20.0, btype="highpass", fs=rate, output="sos")
    return sosfiltfilt(sos, audio.astype(np.float64)).astype(np.float32)


def levelled(audio: np.ndarray, rate: int = RATE, target_lufs: float = LEVEL_LUFS) -> np.ndarray:
    """`audio` scaled to `target_lufs` (BS.1770; RMS for less than the 0.4 s it needs), its peak at most 0.99:
    the speaker encoder's similarity and DNSMOS fall with level (the same sentence 0.93 at -10 dB, 0.45 at -34 dB),
    and level is for a tool downstream to fix, not a fault."""
    import pyloudnorm

    audio = np.asarray(audio, dtype=np.float32)
    if not len(audio) or not np.any(audio):
        return audio
    if len(audio) >= int(0.4 * rate) + 1:
        loudness = pyloudnorm.Meter(rate).integrated_loudness(audio.astype(np.float64))
    else:
        loudness = float("-inf")
    if not np.isfinite(loudness):  # too short or gated away: its RMS, as a sine's loudness would read
        loudness = 10 * np.log10(float(np.mean(audio.astype(np.float64) ** 2)) + 1e-20) - 0.691 + 3.01
    gain = 10 ** ((target_lufs - loudness) / 20)
    peak = float(np.abs(audio).max()) * gain
    gain = gain * 0.99 / peak if peak > 0.99 else gain
    return (audio * np.float32(gain)).astype(np.float32)
