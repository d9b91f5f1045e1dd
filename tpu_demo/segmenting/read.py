"""The read stage: a recordings folder's recordings (a subfolder per speaker) and their own text (NAME.txt), and
each recording as the models hear it: 16 kHz mono, without DC, levelled (level is no fault).
"""

import hashlib
import json
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpu_demo.data.layouts import AUDIO_SUFFIXES
from tpu_demo.errors import FineTuneError
from tpu_demo.segmenting.subtitles import SUFFIXES, read_cues, subtitle_files

CHANNEL_SPREAD, CHANNEL_DB = (10, 95), 6.0  # the percentiles a channel's levels span; how much more than the mix
PULSE_SECONDS, PULSE_SHARE = 0.015, 0.5  # a voice's pulse: another this near, at least this share of its size
CLICK_RATIO, CLICK_FLOOR = 12.0, 0.02  # a click: a sample this many RMS off its 5-point median, and at least
NOISE_FLOOR_SHARE = 0.01  # a recording with no more of its 10 ms windows all zeros has a noise floor
DROPOUT_SECONDS = (0.005, 0.3)  # digital silence this long inside speech is a dropout (longer: a gap, a pause)
WINDOW = 0.02  # seconds: noise is measured on 20 ms windows
RATE = 16000
LEVEL_LUFS = -23.0  # what a piece is levelled to before the measures that depend on level


@dataclass
class Recording:
    path: Path
    name: str  # relative to the recordings folder, without its suffix: names its clips
    speaker: str | None  # its subfolder
    text: str | None  # NAME.txt beside it, else its subtitles' words (NAME.vtt, NAME.srt)
    channel: int | None = None  # the channel its speech is read from (None: its channels mixed; speech_channel)
    cues: list | None = None  # its subtitles' cues (subtitles.Cue), whose times anchor the alignment
    audio: Path | None = None  # the file its audio is read from: `path`, or ffmpeg's decoding of it (decode.py)

    def __post_init__(self):
        self.audio = self.audio or self.path


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


# files users keep beside their recordings that this command does not read, and what to do instead ({0}: the file's
# name without its suffix, {1}: its suffix)
DECODED = (".m4a", ".aac", ".mp4", ".m4b", ".mov", ".mkv", ".webm", ".wma", ".avi", ".amr")  # by ffmpeg (decode.py)
CONVERT = "audio soundfile cannot read, and ffmpeg is not installed: install ffmpeg, or convert it elsewhere "
CONVERT += '(`ffmpeg -i "{0}{1}" "{0}.flac"`)'


def not_read(path: Path, subtitles: dict[Path, Path]) -> str:
    """Why a file beside the recordings is not read."""
    if path.suffix.lower() in DECODED:
        return CONVERT.format(path.stem, path.suffix)
    if subtitles[path.with_suffix("")] != path:
        return f"subtitles: {subtitles[path.with_suffix('')].name} beside it is read instead"
    if path.with_suffix(".txt").is_file():
        return f"subtitles: {path.stem}.txt beside it is the recording's text"
    return "subtitles of no recording (no audio file of its name beside it)"


def find_recordings(folder, skip=()) -> tuple[list[Recording], dict[str, str]]:
    """Every recording in `folder` (a subfolder per speaker), and those that cannot be read, with why; `skip` names
    recordings (relative to `folder`) to leave out."""
    import soundfile

    folder = Path(folder)
    if not folder.is_dir():
        raise FineTuneError(f"recordings {folder}: no such folder")
    found, names, unreadable = [], {}, {}
    skip = {str(Path(name)) for name in skip or ()}
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    subtitles, read = subtitle_files(files), set()
    suffixes = AUDIO_SUFFIXES + (DECODED if shutil.which("ffmpeg") else ())
    for path in (p for p in files if p.suffix.lower() in suffixes):
        relative = path.relative_to(folder)
        if str(relative) in skip:
            continue
        name = str(relative.with_suffix(""))
        if name in names:
            raise FineTuneError(f"recordings: {names[name]} and {relative} would make clips of one name; rename one")
        names[name] = relative
        try:
            if path.suffix.lower() not in DECODED:  # those, when ffmpeg decodes them
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
        speaker, cues = relative.parts[0] if len(relative.parts) > 1 else None, None
        if text is None and (subtitle := subtitles.get(path.with_suffix(""))):
            cues = read_cues(subtitle)
            text = " ".join(cue.text for cue in cues)
            read.add(subtitle)
        found.append(Recording(path, name, speaker, text or None, cues=cues))
    unread = set(DECODED) - set(suffixes)
    for path in (p for p in files if p.suffix.lower() in unread or p in set(subtitles.values()) - read):
        if (relative := str(path.relative_to(folder))) not in skip:  # never left out without a word
            unreadable[relative] = not_read(path, subtitles)
    if missed := sorted(name for name in skip if not (folder / name).is_file()):
        example = next(iter(names.values()), "speaker/take.wav")
        raise FineTuneError(
            f"skip_recordings: {', '.join(missed)} is no recording here (relative to {folder}, e.g. {example})"
        )
    if not found:
        raise FineTuneError(f"recordings {folder}: no readable audio files ({', '.join(suffixes)})")
    return found, unreadable


def heard(block: np.ndarray, channel: int | None) -> np.ndarray:
    """A block's samples as the segmenter hears them: its channels mixed, or the one its speech is in."""
    return block.mean(axis=1) if channel is None else block[:, channel]


def channel_name(recording: Recording) -> str:
    """The channel a recording's speech is read from, in words: "left of 2", "3 of 6"."""
    import soundfile

    count = soundfile.info(str(recording.audio)).channels
    named = ("left", "right")[recording.channel] if count == 2 else str(recording.channel + 1)
    return f"{named} of {count}"


def speech_channel(path: Path) -> int | None:
    """Of a file of several channels, the one its speech is read from: the channel whose 10 ms levels span the most
    (CHANNEL_SPREAD: speech has pauses, a noise or a hum has none) where the mix spans CHANNEL_DB less (a lapel
    microphone in one channel, the room or a noise in the other); None, the mix, otherwise and for a mono file."""
    import soundfile

    info = soundfile.info(str(path))
    if info.channels == 1:
        return None
    size, levels = max(1, info.samplerate // 100), []
    for block in soundfile.blocks(str(path), blocksize=size * 6000, dtype="float32", always_2d=True):
        whole = block[: len(block) // size * size].astype(np.float64)
        both = np.concatenate([whole, whole.mean(axis=1, keepdims=True)], axis=1)  # each channel, then the mix
        levels.append(10 * np.log10((both.reshape(-1, size, both.shape[1]) ** 2).mean(axis=1) + 1e-12))
    levels = np.concatenate(levels) if levels else np.zeros((0, info.channels + 1))
    if len(levels) < 100:
        return None
    spread = np.percentile(levels, CHANNEL_SPREAD[1], axis=0) - np.percentile(levels, CHANNEL_SPREAD[0], axis=0)
    best = int(np.argmax(spread[:-1]))
    return best if spread[-1] < spread[best] - CHANNEL_DB else None


def read_recording(path: Path, channel: int | None = None) -> tuple[np.ndarray, dict, int]:
    """The recording as 16 kHz mono for the models (its `channel`, else its channels mixed), without DC and levelled
    to LEVEL_LUFS; what was marked at its own rate, before any gain, per 10 ms window (window k holds the samples
    of k/100 s up to (k+1)/100 s, at any rate): `clipped`, its samples held flat at or past full scale
    (`clipped_samples`; in the channel read, or any), `level`, its level in dBFS, `clicks`, whether a click is in it
    (one sample far off its neighbours); `dropouts`, each run of digital silence of 5 to 300 ms (`digital_silences`),
    and whether it has a `noise_floor` (its pauses are not digital silence); and its rate. Read block by block, so
    only the 16 kHz copy is ever whole in memory."""
    import soundfile
    import soxr

    info = soundfile.info(str(path))
    rate, count = info.samplerate, info.frames * 100 // info.samplerate + 1
    sums = {name: np.zeros(count) for name in ("clipped", "power", "samples", "zeros", "clicks")}
    stream = soxr.ResampleStream(rate, RATE, 1, dtype="float32")
    audio, dropouts, at = [], [], 0
    for block in soundfile.blocks(str(path), blocksize=rate * 60, dtype="float32", always_2d=True):
        window = np.arange(at, at + len(block), dtype=np.int64) * 100 // rate
        first, local = int(window[0]), window - window[0]

        def add(name, weights=None, first=first, local=local):
            found = np.bincount(local, weights=weights)
            sums[name][first : first + len(found)] += found

        add("clipped", clipped_samples(block if channel is None else block[:, [channel]]).any(axis=1) * 1.0)
        samples = heard(block, channel)
        add("power", samples.astype(np.float64) ** 2)
        add("samples")
        add("zeros", (samples == 0) * 1.0)
        add("clicks", click_samples(samples, local) * 1.0)
        dropouts += [(at / rate + start, *rest) for start, *rest in digital_silences(samples, rate)]
        audio.append(stream.resample_chunk(samples))
        at += len(block)
    audio.append(stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
    audio16k = levelled(without_dc(np.concatenate(audio), RATE))  # level and DC are no faults: gone before judging
    held = sums["samples"] > 0
    silent = int((held & (sums["zeros"] == sums["samples"])).sum())
    marks = {
        "clipped": sums["clipped"],
        "level": 10 * np.log10(sums["power"] / np.maximum(sums["samples"], 1) + 1e-12),
        "clicks": sums["clicks"] > 0,
        "dropouts": dropouts,
        # digital silence in its pauses (a TTS's output, a noise gate): its own gaps inside speech look like dropouts
        "noise_floor": silent <= NOISE_FLOOR_SHARE * max(1, int(held.sum())),
    }
    return audio16k, marks, rate


def clipped_samples(block: np.ndarray) -> np.ndarray:
    """Which samples (frames x channels) are clipped: at full scale and held flat, equal to a neighbour. A float
    file's peaks over 1.0 (a DAW's export) lost nothing; a top held at any one value past full scale is clipped too."""
    flat = np.zeros(block.shape, dtype=bool)
    equal = block[1:] == block[:-1]
    flat[1:] |= equal
    flat[:-1] |= equal
    return flat & (np.abs(block) >= 0.999)


def click_samples(samples: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Which samples are clicks: CLICK_RATIO times the RMS of their 10 ms `window` (an index per sample) away from the
    median of them and their 4 neighbours (a 5-point median follows speech, noise and a TTS's sharp glottal pulses;
    an impulse stands out of it), unless a sample within PULSE_SECONDS that is no such click itself is at least half
    as far off its median: a voice's pulses repeat. A voice's first or last pulse, in a window mostly of pause, stood
    12-15 times that window's RMS (espeak-ng at 22.05 kHz, 16 of 288 sentences of six voices); each had a pulse of
    at least half its size within 15 ms on the voiced side, and none is a click now, while a spike anywhere in those
    sentences is caught as before (199 of 199, 0 more). A click under the level of the sound around it is not caught,
    nor one of a run of clicks each within PULSE_SECONDS of a sound at least half its size that is no click."""
    if len(samples) < 5:
        return np.zeros(len(samples), dtype=bool)
    padded = np.pad(samples, 2, mode="edge")
    away = np.abs(samples - np.median(np.stack([padded[k : k + len(samples)] for k in range(5)]), axis=0))
    counts = np.bincount(window)
    power = np.bincount(window, weights=samples.astype(np.float64) ** 2) / np.maximum(counts, 1)
    clicks = (away > CLICK_RATIO * np.maximum(np.sqrt(power), 1e-6)[window]) & (away > CLICK_FLOOR)
    reach = max(3, round(PULSE_SECONDS * 100 * float(np.median(counts))))  # a window is 10 ms
    pulses = np.where(clicks, 0.0, away)
    for at in np.flatnonzero(clicks):
        beside = np.r_[pulses[max(at - reach, 0) : max(at - 2, 0)], pulses[at + 3 : at + reach + 1]]
        if len(beside) and beside.max() >= PULSE_SHARE * away[at]:
            clicks[at] = False
    return clicks


def digital_silences(samples: np.ndarray, rate: int) -> list[tuple[float, float, float, float, float]]:
    """Runs of exact zeros of DROPOUT_SECONDS: (start s, seconds, dBFS of the 10 ms before and after it, and how far
    into the waveform it cuts: its edge samples' largest share of their 10 ms side's peak). A dropout cuts the
    waveform anywhere (2% or more in 98 of 100 random cuts of speech); a TTS's or a noise gate's silence starts and
    ends where the waveform is at zero (0.3% at most of espeak-ng's 79 gaps inside speech)."""
    zero = np.concatenate([[0], (samples == 0).astype(np.int8), [0]])
    edges = np.diff(zero)
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    side, shortest, longest, found = max(1, int(0.01 * rate)), *(int(s * rate) for s in DROPOUT_SECONDS), []
    for start, end in zip(starts, ends, strict=True):
        if shortest <= end - start <= longest and start >= side and end + side <= len(samples):
            before, after = (
                samples[start - side : start].astype(np.float64),
                samples[end : end + side].astype(np.float64),
            )
            cut = max(abs(before[-1]) / (np.abs(before).max() + 1e-12), abs(after[0]) / (np.abs(after).max() + 1e-12))
            level = [10 * np.log10(np.mean(part**2) + 1e-12) for part in (before, after)]
            found.append((start / rate, (end - start) / rate, float(level[0]), float(level[1]), float(cut)))
    return found


def window_power(audio16k: np.ndarray) -> np.ndarray:
    size = int(WINDOW * RATE)
    windows = audio16k[: len(audio16k) // size * size].reshape(-1, size).astype(np.float64)
    return np.mean(windows**2, axis=1)


def quiet_stretches(audio16k: np.ndarray, start: float, end: float, quiet_db: float, shortest: float, edge: float):
    """(start, end) in seconds of each stretch of the recording between `start` and `end`, at least `shortest` s and
    `edge` s from both ends, whose 10 ms windows are all `quiet_db` under the span's loud level (its 90th percentile):
    a pause too short for the speech detector, a turn 60 ms after the last."""
    size = RATE // 100
    samples = audio16k[int(start * RATE) : int(end * RATE)].astype(np.float64)
    windows = samples[: len(samples) // size * size].reshape(-1, size)
    if not len(windows):
        return []
    level = 10 * np.log10(np.mean(windows**2, axis=1) + 1e-12)
    quiet = level < np.percentile(level, 90) - quiet_db
    quiet[: int(edge * 100)] = quiet[len(quiet) - int(edge * 100) :] = False
    edges = np.flatnonzero(np.diff(np.concatenate([[0], quiet.astype(np.int8), [0]])))
    return [(start + first / 100, start + last / 100) for first, last in zip(edges[::2], edges[1::2], strict=True)
            if last - first >= round(shortest * 100)]  # fmt: skip


def recordings_digest(folder) -> str:
    """Which recordings and texts a folder holds: their names and sizes (cheap to take again before training)."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (*AUDIO_SUFFIXES, *DECODED, ".txt", *SUFFIXES)
                   and p.is_file())  # fmt: skip
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
        return (audio - (audio.mean() if len(audio) else 0.0)).astype(np.float32)
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
