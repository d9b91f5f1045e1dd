"""Long recordings to the clips a fine-tune reads: cut at pauses, transcribed, loudness-normalised, filtered.

A recording's pauses are its 20 ms windows `pause_db` below its loud ones (the 95th percentile) for at least
`min_pause_seconds`; the speech between them is joined into clips of at most `max_clip_seconds`, cut in the middle
of a pause. Each clip is transcribed by a transformers speech recogniser; where the recording comes with its own text
(NAME.txt), that text is aligned to the clips through their transcripts and each clip keeps its part of it (speaker
turns `[S1]`/`[S2]` included). What is dropped, and why, is kept with what is kept.
"""

import difflib
import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tpu_demo.data.layouts import AUDIO_SUFFIXES
from tpu_demo.errors import FineTuneError
from tpu_demo.evaluation.intelligibility import normalise
from tpu_demo.model.tokens import TEXT_TAGS

WINDOW = 0.02  # seconds: the level of each 20 ms window decides speech or pause
EDGE = 0.15  # seconds of a pause kept at each end of a clip (half of a shorter pause)
TURN = re.compile(r"^\[S\d\]$")
REPORT = "segment_report.json"  # in the dataset folder: every clip, kept or dropped, and what it was cut with
PARTS = ".segmenting"  # one file per recording done: what makes a run resumable


@dataclass
class Recording:
    path: Path
    name: str  # relative to the recordings folder, without its suffix: names its clips
    speaker: str | None  # its subfolder
    text: str | None  # NAME.txt beside it


@dataclass
class Clip:
    recording: str
    start: float  # seconds in the recording
    end: float
    speaker: str | None = None
    audio: str | None = None  # the clip's file, relative to the dataset folder (kept clips)
    text: str = ""  # what the dataset says is said
    transcript: str = ""  # what the recogniser heard
    snr_db: float | None = None
    dropped: str | None = None  # why, in a few words (the report counts by them), for a clip that is not kept
    detail: str = ""  # the figures behind `dropped`

    @property
    def seconds(self) -> float:
        return self.end - self.start


def find_recordings(folder) -> list[Recording]:
    """Every recording in `folder` (a subfolder per speaker), checked readable before any work starts."""
    import soundfile

    folder = Path(folder)
    if not folder.is_dir():
        raise FineTuneError(f"recordings {folder}: no such folder")
    found, names = [], {}
    for path in sorted(p for p in folder.rglob("*") if p.suffix.lower() in AUDIO_SUFFIXES and p.is_file()):
        relative = path.relative_to(folder)
        name = str(relative.with_suffix(""))
        if name in names:
            raise FineTuneError(f"recordings: {names[name]} and {relative} would make clips of one name; rename one")
        names[name] = relative
        try:
            soundfile.info(str(path))
        except (soundfile.LibsndfileError, RuntimeError) as error:
            raise FineTuneError(f"recordings: {relative}: unreadable audio ({error})") from None
        text_file = path.with_suffix(".txt")
        try:
            text = " ".join(text_file.read_text(encoding="utf-8-sig").split()) if text_file.is_file() else None
        except UnicodeDecodeError:
            raise FineTuneError(f"recordings: {text_file.relative_to(folder)} is not UTF-8 text") from None
        speaker = relative.parts[0] if len(relative.parts) > 1 else None
        found.append(Recording(path, name, speaker, text or None))
    if not found:
        raise FineTuneError(f"recordings {folder}: no audio files ({', '.join(AUDIO_SUFFIXES)})")
    return found


def window_levels(audio: np.ndarray, rate: int) -> np.ndarray:
    """The level of each 20 ms window, in dB full scale."""
    size = max(1, int(WINDOW * rate))
    windows = audio[: len(audio) // size * size].reshape(-1, size)
    return 10 * np.log10(np.mean(windows.astype(np.float64) ** 2, axis=1) + 1e-12)


def cut(levels: np.ndarray, settings) -> list[tuple[int, int, bool]]:
    """Clips as (first window, end window, cut inside speech): speech between pauses, joined up to the longest clip.
    `too_long` is True for speech without a pause within `max_clip_seconds`."""
    quiet = levels < np.percentile(levels, 95) + settings.pause_db
    pause_windows = max(1, round(settings.min_pause_seconds / WINDOW))
    speech, start, run = [], None, 0  # speech: (first, end) windows between pauses
    for i, is_quiet in enumerate(quiet):
        run = run + 1 if is_quiet else 0
        if not is_quiet and start is None:
            start = i
        elif start is not None and run == pause_windows:
            speech.append((start, i - run + 1))
            start = None
    if start is not None:
        speech.append((start, len(quiet) - run))
    edge = min(round(EDGE / WINDOW), pause_windows // 2)  # two clips' edges never overlap
    longest = settings.max_clip_seconds / WINDOW
    clips = []
    for first, end in speech:
        if clips and end - clips[-1][0] + 2 * edge <= longest:
            clips[-1] = (clips[-1][0], end)  # the pause between them stays inside the clip
        else:
            clips.append((first, end))
    return [(max(0, first - edge), min(len(levels), end + edge), end - first > longest) for first, end in clips]


def words_of(text: str) -> list[tuple[str, str]]:
    """(normalised word, what is written) pairs; a tag (`[S2]`) travels with the word after it, a token of no word
    (a dash) with the word before it."""
    pairs, ahead = [], []
    for token in text.split():
        word = normalise(token)
        if TEXT_TAGS.fullmatch(token) or (not word and not pairs):
            ahead.append(token)
        elif not word:
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]} {token}")
        else:
            pairs.append((word, " ".join([*ahead, token])))
            ahead = []
    return pairs


def align(text: str, transcripts: list[str]) -> list[str]:
    """`text`, said over clips whose `transcripts` the recogniser heard, split into each clip's part: each written
    word goes to the clip of the heard word it aligns with; a word heard nowhere goes with the word before it."""
    given = words_of(text)
    if not transcripts:
        return []
    heard, clip_of = [], []
    for number, transcript in enumerate(transcripts):
        words = normalise(transcript).split()
        heard += words
        clip_of += [number] * len(words)
    owner = [None] * len(given)
    matcher = difflib.SequenceMatcher(a=[word for word, _ in given], b=heard, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            for k in range(i1, i2):
                owner[k] = clip_of[j1 + (k - i1) * (j2 - j1) // (i2 - i1)]
    for k in range(len(given)):  # words heard nowhere: with the word before (at the start: the word after)
        if owner[k] is None:
            before = next((owner[i] for i in range(k - 1, -1, -1) if owner[i] is not None), None)
            after = next((owner[i] for i in range(k + 1, len(given)) if owner[i] is not None), 0)
            owner[k] = before if before is not None else after
    parts = [[] for _ in transcripts]
    turn = "[S1]"
    for (_, written), number in zip(given, owner, strict=True):
        if not parts[number]:  # a clip that starts inside a turn says whose it is
            first = written.split()[0]
            parts[number].append(written if TURN.match(first) else f"{turn} {written}")
        else:
            parts[number].append(written)
        turn = next((token for token in reversed(written.split()) if TURN.match(token)), turn)
    return [" ".join(part) for part in parts]


def spoken_characters(text: str) -> int:
    return len(normalise(text).replace(" ", ""))


def disagreement(text: str, transcript: str) -> float:
    """The character error rate of `transcript` against `text` (normalised as for `eval_asr_model`)."""
    import jiwer

    return float(jiwer.cer(normalise(text), normalise(transcript) or ""))


def normalised_loudness(audio: np.ndarray, levels: np.ndarray, quiet: float, target_dbfs: float) -> np.ndarray:
    """`audio` scaled so its speech windows (louder than `quiet` dB) have the RMS level `target_dbfs`, its peak kept
    below -1 dBFS."""
    speech = levels[levels >= quiet]
    level = 10 * np.log10(np.mean(10 ** (speech / 10))) if len(speech) else -np.inf
    gain = 10 ** ((target_dbfs - level) / 20) if np.isfinite(level) else 1.0
    peak = float(np.abs(audio).max()) * gain
    if peak > 10 ** (-1 / 20):
        gain *= 10 ** (-1 / 20) / peak
    return (audio * gain).astype(np.float32)


def scan(path: Path):
    """Each 20 ms window's level (dBFS, of the mono downmix) and count of samples at full scale (on any channel),
    and the rate, read block by block: hours of audio are never in memory at once."""
    import soundfile

    rate = soundfile.info(str(path)).samplerate
    size = max(1, int(WINDOW * rate))
    levels, clipped = [], []
    for block in soundfile.blocks(str(path), blocksize=size * 3000, dtype="float32", always_2d=True):
        whole = len(block) // size * size  # a last part shorter than a window is not a window
        levels.append(window_levels(block[:whole].mean(axis=1), rate))
        clipped.append((np.abs(block[:whole]) >= 0.999).any(axis=1).reshape(-1, size).sum(axis=1))
    return np.concatenate(levels or [np.zeros(0)]), np.concatenate(clipped or [np.zeros(0)]), rate


def read_clip(path: Path, first: int, end: int, size: int) -> np.ndarray:
    import soundfile

    audio, _ = soundfile.read(str(path), start=first * size, stop=end * size, dtype="float32", always_2d=True)
    return audio.mean(axis=1)


def segment(recording: Recording, settings, transcribe, out_dir: Path) -> list[Clip]:
    """The clips of one recording, each written to out_dir/clips/ when kept, or with the reason it was dropped."""
    import soundfile

    levels, clipped, rate = scan(recording.path)
    if not len(levels):
        return [Clip(recording.name, 0.0, 0.0, recording.speaker, dropped="empty", detail="no audio")]
    quiet = np.percentile(levels, 95) + settings.pause_db
    floor = levels[levels < quiet]
    noise = 10 * np.log10(np.mean(10 ** (floor / 10))) if len(floor) else -120.0
    size = int(WINDOW * rate)
    clips, spans = [], []
    for first, end, too_long in cut(levels, settings):
        clip = Clip(recording.name, first * WINDOW, end * WINDOW, recording.speaker)
        speech = levels[first:end][levels[first:end] >= quiet]
        clip.snr_db = float(10 * np.log10(np.mean(10 ** (speech / 10))) - noise) if len(speech) else 0.0
        share = float(clipped[first:end].sum()) / ((end - first) * size)
        if too_long:
            clip.dropped, clip.detail = "too long", f"no pause within max_clip_seconds {settings.max_clip_seconds}"
        elif clip.seconds < settings.min_clip_seconds:
            clip.dropped, clip.detail = "too short", f"{clip.seconds:.2f} s < min_clip_seconds"
        elif share > settings.max_clipped_share:
            clip.dropped, clip.detail = "clipping", f"{share:.2%} of its samples at full scale"
        elif clip.snr_db < settings.min_snr_db:
            clip.dropped, clip.detail = "noisy", f"speech {clip.snr_db:.1f} dB above the pauses < min_snr_db"
        if not clip.dropped:
            clip.transcript = transcribe(read_clip(recording.path, first, end, size), rate)
        clips.append(clip)
        spans.append((first, end))
    heard = [clip for clip in clips if not clip.dropped]
    if recording.text is not None:
        for clip, part in zip(heard, align(recording.text, [clip.transcript for clip in heard]), strict=True):
            clip.text = part
            if not normalise(part):
                clip.dropped, clip.detail = "no text aligned", "none of the recording's text aligns with it"
            elif (cer := disagreement(part, clip.transcript)) > settings.max_asr_cer:
                clip.dropped, clip.detail = "recogniser disagrees", f"CER {cer:.2f} > max_asr_cer"
    else:
        for clip in heard:
            clip.text = f"[S1] {clip.transcript}" if normalise(clip.transcript) else ""
            if not clip.text:
                clip.dropped, clip.detail = "no words heard", "the recogniser heard no words"
    for number, (clip, (first, end)) in enumerate(zip(clips, spans, strict=True), 1):
        if clip.dropped:
            continue
        sound = normalised_loudness(read_clip(recording.path, first, end, size), levels[first:end], quiet,
                                    settings.target_dbfs)  # fmt: skip
        clip.audio = f"clips/{recording.name}-{number:04d}.wav"
        path = out_dir / clip.audio
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(path), sound, rate, subtype="PCM_16")
    return clips


def drop_unusual_pace(clips: list[Clip], tolerance: float) -> None:
    """Drops the kept clips whose seconds per character are more than `tolerance` times off the kept clips' median."""
    kept = [clip for clip in clips if not clip.dropped]
    paces = [clip.seconds / max(spoken_characters(clip.text), 1) for clip in kept]
    if not paces:
        return
    median = float(np.median(paces))
    for clip, pace in zip(kept, paces, strict=True):
        if not median / tolerance <= pace <= median * tolerance:
            low, high = median / tolerance, median * tolerance
            clip.dropped, clip.detail = "unusual pace", f"{pace:.3f} s per character, outside {low:.3f}..{high:.3f}"


def report(clips: list[Clip], recordings: int) -> dict:
    """Counts and seconds kept and dropped, by reason (the reason's words before its figures) and by speaker."""
    kept = [clip for clip in clips if not clip.dropped]
    reasons = {}
    for clip in clips:
        if clip.dropped:
            count, seconds = reasons.get(clip.dropped, (0, 0.0))
            reasons[clip.dropped] = (count + 1, seconds + clip.seconds)
    speakers = {}
    for clip in kept:
        count, seconds = speakers.get(clip.speaker or "-", (0, 0.0))
        speakers[clip.speaker or "-"] = (count + 1, seconds + clip.seconds)
    return {
        "recordings": recordings,
        "kept": {"clips": len(kept), "seconds": round(sum(clip.seconds for clip in kept), 2)},
        "dropped": {reason: {"clips": n, "seconds": round(s, 2)} for reason, (n, s) in reasons.items()},
        "speakers": {speaker: {"clips": n, "seconds": round(s, 2)} for speaker, (n, s) in speakers.items()},
        "clips": [asdict(clip) for clip in clips],
    }


def settings_fingerprint(recordings_args, asr_model: str) -> str:
    """What the clips depend on besides the audio: every segmenting setting and the recogniser (not where the
    recordings are: a moved folder is the same recordings)."""
    settings = asdict(recordings_args) | {"segment_asr_model": asr_model, "recordings": None}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def recordings_digest(folder) -> str:
    """Which recordings and texts a folder holds: their names and sizes (cheap to take again before training)."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (*AUDIO_SUFFIXES, ".txt") and p.is_file())
    listing = [(str(p.relative_to(folder)), p.stat().st_size) for p in files]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]


def recording_fingerprint(recording, settings: str) -> str:
    stat = recording.path.stat()
    return hashlib.sha256(f"{settings} {stat.st_size} {stat.st_mtime_ns} {recording.text}".encode()).hexdigest()[:16]


def recogniser(config) -> str:
    name = config.recordings.segment_asr_model or config.evaluation.eval_asr_model
    if not name:
        raise FineTuneError("recordings: set segment_asr_model (or eval_asr_model), the recogniser that transcribes")
    return name


def check_segmented(config) -> None:
    """Training on `recordings`: refuses a `dataset` not cut from them with these settings."""
    if not Path(config.recordings.recordings).is_dir():
        raise FineTuneError(f"recordings {config.recordings.recordings}: no such folder")
    report = Path(config.data.dataset) / REPORT
    found = json.loads(report.read_text()) if report.is_file() else {}
    same = found.get("settings") == settings_fingerprint(config.recordings, recogniser(config))
    if not (same and found.get("recordings_digest") == recordings_digest(config.recordings.recordings)):
        state = "cut from other recordings or settings than" if found else "not cut from recordings"
        raise FineTuneError(
            f"dataset {config.data.dataset}: {state} {config.recordings.recordings}: run `python -m tpu_demo.segment` "
            "with this config first"
        )
