"""Long recordings to the clips a fine-tune reads, in stages each cached by its own settings and inputs:

1. cut: Silero VAD finds the speech; pauses of at least `min_pause_seconds` part it into pieces.
2. measure: each piece's true SNR (against the pauses around it), clipping, DNSMOS scores and voice embedding.
3. transcribe: each piece by the recogniser (where it may be kept, or the recording has its own text).
4. join (every run, for all recordings at once): pieces judged one by one against the thresholds and their speaker's
   voice, the good neighbours joined into clips of at most `max_clip_seconds`, cut in the middle of the pauses,
   loudness-normalised (BS.1770) and written; what is dropped, and why, is kept with what is kept.

A fault costs its own piece only. Where a recording comes with its own text (NAME.txt), that text is aligned to the
pieces through their transcripts and each keeps its part of it (speaker turns `[S1]`/`[S2]` included).
"""

import dataclasses
import difflib
import hashlib
import json
import math
import re
import struct
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tpu_demo.data.layouts import AUDIO_SUFFIXES
from tpu_demo.data.speech_models import RATE, bandwidth, levelled, without_dc
from tpu_demo.errors import FineTuneError
from tpu_demo.evaluation.intelligibility import normalise
from tpu_demo.model.tokens import TEXT_TAGS, text_tokens

WINDOW = 0.02  # seconds: noise is measured on 20 ms windows
EDGE = 0.15  # seconds of a pause kept at each end of a clip (half of a shorter pause)
NOISE_REACH = 3.0  # seconds: a piece's noise is that of the pauses this close to it, if 0.3 s or more
JOIN_PAUSE = 2.0  # seconds: pieces further apart are never one clip (a clip would teach the model long silences)
UNIT_END = re.compile(r"[.!?;:,][\"')\]]*$")  # a written word that ends a unit of text (text_units)
SEARCH_SKIP, SEARCH_UNITS, SEARCH_TRIES = 2, 4, 6  # align_text's search for each piece's part of the text
SECONDS_PER_CHARACTER = 0.075  # a guess at the pace where a recording has no characters to tell its own
ALIGN_SILENCE = 0.4  # seconds: an aligner's silence longer than this inside a piece of speech: speech its text lacks
MIN_BANDWIDTH_HZ = 6000.0  # a narrower piece (telephone 3.4 kHz, AM radio 5 kHz) would teach a full-band codec muffled
TURN = re.compile(r"^\[S\d\]$")
REPORT = "segment_report.json"  # in the dataset folder: every clip, kept or dropped, and what it was cut with
ALIGNER = "a4"  # the version of speech_models.Aligner's judgement: a change here aligns every piece again
PARTS = ".segmenting"  # one folder per recording: its stages' results, what makes a run resumable
CORRECTIONS = "corrections.csv"  # the user's edits of metadata.csv texts, kept across reruns
DIA_TOKENS_PER_SECOND = 512 / 20  # Dia-1.6B's max_text_tokens over the seconds its max_audio_frames hold
SPOKEN_TOKENS_PER_SECOND = 16  # UTF-8 bytes a second of brisk English speech (about 190 words a minute)
DIA_CODEC = (44100, 512)  # Dia's codec, descript/dac_44khz: its rate and hop, where the YAML's codec cannot be read


@dataclass
class Recording:
    path: Path
    name: str  # relative to the recordings folder, without its suffix: names its clips
    speaker: str | None  # its subfolder
    text: str | None  # NAME.txt beside it


@dataclass
class Piece:
    """Speech between two pauses, with what was measured of it."""

    start: float
    end: float
    snr_db: float | None = None  # None: no pause near it to measure the noise in
    clipped: float = 0.0  # share of its samples at full scale
    bandwidth_hz: float | None = None  # speech_models.bandwidth, in the 16 kHz copy
    sound_before: bool = False  # a sound in the pause before it (a cough, a click): no clip joins across it
    alignment: float | None = None  # the forced alignment's confidence in its text (align_text), 0-1
    dnsmos: dict = field(default_factory=dict)
    voice: list = field(default_factory=list)  # speaker embedding
    voice_windows: list = field(default_factory=list)  # those of its 1.6 s windows (speech_models.VoiceEncoder)
    transcript: str | None = None
    text: str = ""
    dropped: str | None = None
    detail: str = ""


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
    bandwidth_hz: float | None = None  # the narrowest of its pieces'
    alignment: float | None = None  # the least confident of its pieces' alignments; None: not aligned
    dropped: str | None = None  # why, in a few words (the report counts by them), for a clip that is not kept
    detail: str = ""  # the figures behind `dropped`
    dnsmos: dict = field(default_factory=dict)
    corrected: bool = False  # its text is the user's (corrections.csv)

    @property
    def seconds(self) -> float:
        return self.end - self.start


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


def measure(audio16k: np.ndarray, clipped: np.ndarray, rate: int, spans, judge=None, encoder=None) -> list[Piece]:
    """Each span of speech as a Piece with its SNR, clipping, bandwidth, and, given the models (`judge`, `encoder`),
    DNSMOS scores and voice (else `quality` gives them to the pieces the cheaper measures keep)."""
    power = window_power(audio16k)
    pause = np.ones(len(power), dtype=bool)
    for start, end in spans:  # a pause starts 0.1 s away from speech: its edges carry speech
        pause[max(0, int((start - 0.1) / WINDOW)) : int((end + 0.1) / WINDOW) + 1] = False
    centres = np.arange(len(power)) * WINDOW
    pieces, previous_end = [], None
    for start, end in spans:
        piece = Piece(round(start, 3), round(end, 3))
        if previous_end is not None:  # a window of the pause 20 dB over its median: a sound no clip may hold
            between = power[pause & (centres > previous_end) & (centres < start)]
            piece.sound_before = bool(len(between) and between.max() > max(100 * np.median(between), 1e-7))
        previous_end = end
        noise = None
        for reach in (NOISE_REACH, 15.0, np.inf):  # the nearest pauses that are long enough to measure
            sides = [
                pause & (centres >= start - reach) & (centres < start),
                pause & (centres > end) & (centres <= end + reach),
            ]
            # the median window: a click or a cough in the pause is not the noise under the speech
            levels = [float(np.median(power[side])) for side in sides if side.sum() * WINDOW >= 0.3]
            if levels:  # the quieter side: noise that starts or stops in a pause is not this piece's
                noise = min(levels)
                break
        speech = power[int(start / WINDOW) : max(int(end / WINDOW), int(start / WINDOW) + 1)]
        if noise is not None:
            level = max(noise, 1e-12)
            piece.snr_db = round(10 * np.log10(max(float(np.mean(speech)) - level, 1e-12) / level), 2)
        first, last = int(start * 100), max(int(end * 100), int(start * 100) + 1)  # 10 ms windows
        piece.clipped = round(float(clipped[first:last].sum()) / ((last - first) * max(1, rate // 100)), 6)
        samples = levelled(audio16k[int(start * RATE) : int(end * RATE)])  # each piece at one level
        piece.bandwidth_hz = bandwidth(samples)
        if judge is not None and encoder is not None:
            piece.dnsmos, (piece.voice, piece.voice_windows) = judge(samples), encoder(samples)
        pieces.append(piece)
    return pieces


def quality(audio16k: np.ndarray, piece: Piece, judge, encoder) -> dict:
    """A piece's DNSMOS scores and voice, measured levelled: the costly measures, taken of the pieces the cheap ones
    (SNR, clipping, bandwidth, length) keep."""
    samples = levelled(audio16k[int(piece.start * RATE) : int(piece.end * RATE)])
    voice, windows = encoder(samples)
    return {"dnsmos": judge(samples), "voice": voice, "voice_windows": windows}


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


def judge(pieces: list[Piece], recording: Recording, settings) -> None:
    """Drops the pieces that fail a threshold of their own, naming the measure that decided; all of a recording
    whose speech is shorter than `min_clip_seconds` is too short, whatever else is wrong with it."""
    speech = sum(piece.end - piece.start for piece in pieces)
    if pieces and pieces[-1].end - pieces[0].start < settings.min_clip_seconds:
        for piece in pieces:
            piece.dropped = "too short"
            piece.detail = f"all the speech of its recording is {speech:.2f} s < min_clip_seconds"
        return
    for piece in pieces:
        bak, ovrl = piece.dnsmos.get("bak", 5.0), piece.dnsmos.get("ovrl", 5.0)
        if piece.end - piece.start > settings.max_clip_seconds:
            piece.dropped, piece.detail = "too long", f"no pause within max_clip_seconds {settings.max_clip_seconds}"
        elif piece.clipped > settings.max_clipped_share:
            piece.dropped, piece.detail = "clipping", f"{piece.clipped:.2%} of its samples at full scale"
        elif piece.bandwidth_hz is not None and piece.bandwidth_hz < MIN_BANDWIDTH_HZ:
            piece.dropped = "band-limited"
            piece.detail = f"bandwidth {piece.bandwidth_hz / 1000:.1f} kHz < {MIN_BANDWIDTH_HZ / 1000:.0f} kHz"
        elif piece.snr_db is not None and piece.snr_db < settings.min_snr_db:
            piece.dropped, piece.detail = "noisy", f"SNR {piece.snr_db:.1f} dB < min_snr_db {settings.min_snr_db}"
        elif bak < settings.min_dnsmos_bak:
            piece.dropped, piece.detail = "noisy", f"DNSMOS BAK {bak:.2f} < min_dnsmos_bak {settings.min_dnsmos_bak}"
        elif ovrl < settings.min_dnsmos_ovrl:
            piece.dropped = "poor quality"
            piece.detail = f"DNSMOS OVRL {ovrl:.2f} < min_dnsmos_ovrl {settings.min_dnsmos_ovrl}"


def needs_transcript(piece: Piece, recording: Recording, settings) -> bool:
    """Pieces that may be kept; with the recording's own text, none where the text is aligned to the audio
    (`aligns`), else all of them: the text is split over every one through their transcripts."""
    if aligns(recording, settings):
        return False
    return recording.text is not None or not piece.dropped


VOICE_SECONDS = 1.0  # a shorter piece's voice embedding is too uncertain to judge it by (GE2E: 1.6 s windows)


OVERLAP_SPREAD = 5.0  # robust deviations under its speaker's usual window: a piece's least similar 1.6 s window
LEAST_SPREAD = 0.02  # the smallest such deviation counted: one synthetic voice's windows vary by less than a person's
OVERLAP_BAK = 0.5  # DNSMOS BAK under its speaker's usual: a second talker is background to DNSMOS


def speaker_voice(kept: list[Piece]) -> tuple[np.ndarray, list[Piece]]:
    """A speaker's voice: the mean of the half of its pieces nearest the mean of all, so that other voices and faults
    do not pull it; and those pieces (its confident ones)."""
    voices = np.array([piece.voice for piece in kept])
    nearest = np.argsort(-(voices @ voices.mean(axis=0)))[: max(2, (len(kept) + 1) // 2)]
    centre = voices[nearest].mean(axis=0)
    return centre / np.linalg.norm(centre), [kept[index] for index in nearest]


def voiced_pieces(pieces: list[Piece]) -> list[Piece]:
    return [p for p in pieces if not p.dropped and p.voice and p.end - p.start >= VOICE_SECONDS]


def drop_other_voices(pieces: list[Piece], threshold: float, recordings: list[list[Piece]] | None = None) -> None:
    """Drops the pieces of one speaker whose voice is less similar than `threshold` to the speaker's voice
    (`speaker_voice`, taken again without those dropped), then those a second voice speaks over (`drop_overlaps`;
    `recordings`: the pieces by recording, all one where not given). Needs three pieces of VOICE_SECONDS or more to
    tell a voice from the rest; a shorter piece is judged with its clip (join), not by its voice."""
    for _ in range(2):
        kept = voiced_pieces(pieces)
        if len(kept) < 3:
            return
        centre, _ = speaker_voice(kept)
        for piece, similarity in zip(kept, np.array([piece.voice for piece in kept]) @ centre, strict=True):
            if similarity < threshold:
                piece.dropped = "other voice"
                piece.detail = f"similarity {similarity:.2f} to its speaker < min_speaker_similarity {threshold}"
    drop_overlaps(voiced_pieces(pieces), [voiced_pieces(group) for group in (recordings or [pieces])])


def drop_overlaps(kept: list[Piece], recordings: list[list[Piece]]) -> None:
    """Drops the pieces where a second voice speaks over part of it, by two measures that must both say so: its least
    similar 1.6 s window more than OVERLAP_SPREAD robust deviations under the similarity of the windows of its
    speaker's confident pieces (their median; 1.4826 median absolute deviations, at least LEAST_SPREAD), and its DNSMOS
    BAK more than OVERLAP_BAK under the median of its recording's other pieces (its room and microphone). Either alone
    also marks good speech (a quiet recording, levelled, moves the voice; a noisier room, the BAK)."""
    if len(kept) < 3:
        return
    centre, confident = speaker_voice(kept)
    usual = [float(window @ centre) for piece in confident for window in np.array(piece.voice_windows)]
    if len(usual) < 3:
        return
    median = float(np.median(usual))
    spread = max(1.4826 * float(np.median(np.abs(np.array(usual) - median))), LEAST_SPREAD)
    cut = median - OVERLAP_SPREAD * spread
    least = {id(piece): float(np.min(np.array(piece.voice_windows) @ centre)) for piece in kept if piece.voice_windows}
    for group in recordings:
        odd = [piece for piece in group if least.get(id(piece), 1.0) < cut]
        others = [piece for piece in group if least.get(id(piece), 1.0) >= cut]
        baks = [piece.dnsmos["bak"] for piece in others if "bak" in piece.dnsmos]
        if not odd or len(baks) < 2:  # none to judge, or too few to tell the recording's usual
            continue
        bak = float(np.median(baks))
        for piece in odd:
            if piece.dnsmos.get("bak", 5.0) < bak - OVERLAP_BAK:
                piece.dropped = "overlapping voice"
                piece.detail = (
                    f"its least similar 1.6 s {least[id(piece)]:.2f} to its speaker, under {cut:.2f} (its speaker's "
                    f"confident pieces: {median:.2f}, deviation {spread:.3f}), and DNSMOS BAK "
                    f"{piece.dnsmos['bak']:.2f}, under {bak - OVERLAP_BAK:.2f} (its recording's others: {bak:.2f})"
                )


def give_texts(pieces: list[Piece], recording: Recording, max_asr_cer: float) -> None:
    """Each piece's text: its part of the recording's own text (checked against its transcript), else what the
    recogniser heard."""
    if recording.text is not None:
        parts = align(recording.text, [piece.transcript or "" for piece in pieces])
        for piece, part in zip(pieces, parts, strict=True):
            piece.text = part
            if piece.dropped:
                continue
            if not normalise(part):
                piece.dropped, piece.detail = "no text aligned", "none of the recording's text aligns with it"
            elif (cer := disagreement(part, piece.transcript or "")) > max_asr_cer:
                piece.dropped, piece.detail = "recogniser disagrees", f"CER {cer:.2f} > max_asr_cer {max_asr_cer}"
        return
    for piece in pieces:
        if not piece.dropped:
            piece.text = f"[S1] {piece.transcript}" if normalise(piece.transcript or "") else ""
            if not piece.text:
                piece.dropped, piece.detail = "no words heard", "the recogniser heard no words"


def alignment_key(start: float, end: float, text: str) -> str:
    """A forced alignment of a text to a span of a recording is cached by the span, the words of the text and the
    aligner's version (ALIGNER)."""
    return f"{ALIGNER} {start:.3f}-{end:.3f} {hashlib.sha256(normalise(text).encode()).hexdigest()[:16]}"


def aligns(recording: Recording, settings) -> bool:
    """Whether a recording's own text is split over its pieces by forced alignment (English, pocketsphinx's
    dictionary); other languages' through the recogniser's transcripts (`give_texts`)."""
    language = settings.segment_language
    return recording.text is not None and not (language and not language.lower().startswith("en"))


def text_units(text: str) -> list[list[tuple[str, str]]]:
    """The text's words (`words_of`) in units that end at punctuation (. ! ? ; : ,): where pauses fall, and so where
    pieces start and end."""
    units, unit = [], []
    for pair in words_of(text):
        unit.append(pair)
        if UNIT_END.search(pair[1]):
            units.append(unit)
            unit = []
    return units + ([unit] if unit else [])


def unit_texts(units) -> list[str]:
    """Each unit as written, with the speaker turn it is said in at its start."""
    turn, texts = "[S1]", []
    for unit in units:
        written = " ".join(word for _, word in unit)
        texts.append(written if TURN.match(written.split()[0]) else f"{turn} {written}")
        turn = next((token for token in reversed(written.split()) if TURN.match(token)), turn)
    return texts


def align_text(pieces: list[Piece], recording: Recording, align_piece) -> None:
    """Each piece's part of its recording's own text, found by aligning candidate parts to its audio (`align_piece
    (piece, text)`: speech_models.Aligner's result): from where the previous piece's part ended, skipping up to
    SEARCH_SKIP units (text said in no piece, or in a piece that did not align), of 1 to SEARCH_UNITS units, the
    likeliest by the pace of the pieces aligned so far (before any, the recording's: all its pieces' seconds over
    all its text's characters) first; the first that aligns without a problem is the piece's. A piece none of the
    SEARCH_TRIES likeliest parts aligns to is dropped as `uncertain alignment` rather than kept with guessed text,
    and its words go to no other piece. Each piece carries its alignment's confidence."""
    units = text_units(recording.text)
    texts, at, paces = unit_texts(units), 0, []
    characters = [sum(len(word) for word, _ in unit) for unit in units]
    # until a piece aligns, the recording's own pace: all its speech over all its text (a fast speaker's first
    # piece holds more text than a usual pace would put in it)
    speech, written = sum(piece.end - piece.start for piece in pieces), sum(characters)
    first_pace = speech / written if speech and written else SECONDS_PER_CHARACTER
    for piece in pieces:
        seconds = piece.end - piece.start
        expected = seconds / (float(np.median(paces)) if paces else first_pace)
        candidates = [(skip, length) for skip in range(SEARCH_SKIP + 1) for length in range(1, SEARCH_UNITS + 1)
                      if at + skip + length <= len(units)]  # fmt: skip

        def likely(candidate, expected=expected, at=at):
            skip, length = candidate
            said = sum(characters[at + skip : at + skip + length])
            return abs(said - expected) / max(expected, 1.0) + 0.25 * skip

        first_failure = None
        for skip, length in sorted(candidates, key=likely)[:SEARCH_TRIES]:
            part = joined_text(texts[at + skip : at + skip + length])
            found = align_piece(piece, part)
            if not found["problem"]:
                piece.text, piece.alignment = part, found["confidence"]
                paces.append(seconds / max(spoken_characters(part), 1))
                at += skip + length
                break
            first_failure = first_failure or found
        else:
            piece.alignment = first_failure["confidence"] if first_failure else None
            if not piece.dropped:
                piece.dropped = "uncertain alignment"
                piece.detail = (
                    f"no part of its recording's text aligns: {first_failure['problem']} (alignment confidence "
                    f"{first_failure['confidence']:.2f})"
                    if first_failure
                    else "none of its recording's text is left to align"
                )


def joined_text(parts: list[str]) -> str:
    """The texts of neighbouring pieces as one, a part that goes on in the same speaker turn without its tag."""
    words, turn = [], None
    for part in parts:
        tokens = part.split()
        if tokens and TURN.match(tokens[0]) and tokens[0] == turn:
            tokens = tokens[1:]
        words += tokens
        turn = next((token for token in reversed(words) if TURN.match(token)), turn)
    return " ".join(words)


def with_margins(pieces: list[Piece], first: int, last: int, seconds: float) -> tuple[float, float]:
    """Where a clip of `pieces[first:last + 1]` starts and ends: up to EDGE into the pauses around it, never past half
    of one."""
    before = pieces[first - 1].end if first else 0.0
    after = pieces[last + 1].start if last + 1 < len(pieces) else seconds
    start = pieces[first].start - min(EDGE, (pieces[first].start - before) / 2)
    end = pieces[last].end + min(EDGE, (after - pieces[last].end) / 2)
    return round(max(0.0, start), 3), round(min(seconds, end), 3)


def join(pieces: list[Piece], recording: Recording, seconds: float, settings, max_text_tokens=None) -> list[Clip]:
    """Clips of neighbouring kept pieces, at most `max_clip_seconds` with their margins and `max_text_tokens` of text
    (training drops a longer text), no pause longer than JOIN_PAUSE inside nor a sound in a pause; each dropped piece
    a dropped clip of its own, and a piece whose text alone is too long dropped as `text too long`. A clip's margins
    are up to EDGE of the pauses around it, never past half of one."""

    def too_much_text(numbers) -> bool:
        return (
            bool(max_text_tokens)
            and text_tokens(joined_text([pieces[i].text or "" for i in numbers])) > max_text_tokens
        )

    groups, group = [], []  # runs of indices into `pieces`
    for number, piece in enumerate(pieces):
        if piece.dropped:
            groups += [group] if group else []
            groups.append([number])
            group = []
        elif group and (
            piece.end - pieces[group[0]].start + 2 * EDGE > settings.max_clip_seconds
            or piece.start - pieces[group[-1]].end > JOIN_PAUSE
            or piece.sound_before
            or too_much_text([*group, number])
        ):
            groups.append(group)
            group = [number]
        else:
            group.append(number)
    groups += [group] if group else []
    clips = []
    for numbers in groups:
        group = [pieces[number] for number in numbers]
        clip = Clip(recording.name, *with_margins(pieces, numbers[0], numbers[-1], seconds), recording.speaker)
        clip.text = joined_text([piece.text for piece in group])
        clip.transcript = " ".join(piece.transcript or "" for piece in group).strip()
        snrs = [piece.snr_db for piece in group if piece.snr_db is not None]
        clip.snr_db = min(snrs) if snrs else None
        confidences = [piece.alignment for piece in group if piece.alignment is not None]
        clip.alignment = min(confidences) if confidences else None
        widths = [piece.bandwidth_hz for piece in group if piece.bandwidth_hz is not None]
        clip.bandwidth_hz = min(widths) if widths else None
        clip.dnsmos = {key: min(piece.dnsmos[key] for piece in group) for key in group[0].dnsmos}
        clip.dropped, clip.detail = group[0].dropped, group[0].detail
        if not clip.dropped and clip.seconds < settings.min_clip_seconds:
            clip.dropped, clip.detail = "too short", f"{clip.seconds:.2f} s < min_clip_seconds"
        elif not clip.dropped and too_much_text(numbers):
            clip.dropped = "text too long"
            clip.detail = f"{text_tokens(clip.text)} Dia tokens > max_text_tokens {max_text_tokens}"
        clips.append(clip)
    return clips


def write_clip(clip: Clip, path: Path, out_dir: Path, target_lufs: float) -> None:
    """The clip's audio from the recording at `path`, without DC, loudness-normalised, as 16-bit WAV at the
    recording's rate."""
    import soundfile

    from tpu_demo.data.speech_models import loudness_normalised

    rate = soundfile.info(str(path)).samplerate
    audio, _ = soundfile.read(
        str(path), start=int(clip.start * rate), stop=int(clip.end * rate), dtype="float32", always_2d=True
    )
    clip.audio = f"clips/{clip.recording}-{round(clip.start * 100):07d}.wav"
    target = out_dir / clip.audio
    target.parent.mkdir(parents=True, exist_ok=True)
    mono = without_dc(audio.mean(axis=1), rate)
    soundfile.write(str(target), loudness_normalised(mono, rate, target_lufs), rate, subtype="PCM_16")


def drop_unusual_pace(clips: list[Clip], tolerance: float) -> None:
    """Drops the kept clips whose seconds per character are more than `tolerance` times off the median of their
    speaker's kept clips (of their recording where it has no speaker folder): one speaker's pace is not another's."""
    speakers = {}
    for clip in clips:
        if not clip.dropped:
            speakers.setdefault(clip.speaker or clip.recording, []).append(clip)
    for kept in speakers.values():
        drop_off_pace(kept, tolerance)


def drop_off_pace(kept: list[Clip], tolerance: float) -> None:
    paces = [clip.seconds / max(spoken_characters(clip.text), 1) for clip in kept]
    median = float(np.median(paces))
    for clip, pace in zip(kept, paces, strict=True):
        if not median / tolerance <= pace <= median * tolerance:
            low, high = median / tolerance, median * tolerance
            clip.dropped, clip.detail = "unusual pace", f"{pace:.3f} s per character, outside {low:.3f}..{high:.3f}"


def report(clips: list[Clip], recordings: int) -> dict:
    """Counts and seconds kept and dropped, by reason (the reason's words before its figures) and by speaker; the
    kept clips whose text was aligned (and the least confidence), those that carry a transcript unchecked, and
    those whose SNR could not be measured."""
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
    aligned = [clip.alignment for clip in kept if clip.alignment is not None]
    unchecked = [clip for clip in kept if clip.alignment is None and not clip.corrected]
    unmeasured = [clip for clip in kept if clip.snr_db is None]

    def tally(some: list[Clip]) -> dict:
        return {"clips": len(some), "seconds": round(sum(clip.seconds for clip in some), 2)}

    return {
        "recordings": recordings,
        "kept": tally(kept),
        "aligned": {"clips": len(aligned), "least_confidence": min(aligned, default=None)},
        "unchecked": tally(unchecked),
        "unmeasured_snr": tally(unmeasured),
        "dropped": {reason: {"clips": n, "seconds": round(s, 2)} for reason, (n, s) in reasons.items()},
        "speakers": {speaker: {"clips": n, "seconds": round(s, 2)} for speaker, (n, s) in speakers.items()},
        "clips": [asdict(clip) for clip in clips],
    }


def segment_settings(recordings_args, asr_model: str) -> dict:
    """What the clips depend on besides the audio: every segmenting setting and the recogniser (not where the
    recordings are: a moved folder is the same recordings)."""
    return asdict(recordings_args) | {"segment_asr_model": asr_model, "recordings": None}


def settings_fingerprint(recordings_args, asr_model: str) -> str:
    settings = segment_settings(recordings_args, asr_model)
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def recordings_digest(folder) -> str:
    """Which recordings and texts a folder holds: their names and sizes (cheap to take again before training)."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.suffix.lower() in (*AUDIO_SUFFIXES, ".txt") and p.is_file())
    listing = [(str(p.relative_to(folder)), p.stat().st_size) for p in files]
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()[:16]


def recogniser(config) -> str:
    name = config.recordings.segment_asr_model or config.evaluation.eval_asr_model
    if not name:
        raise FineTuneError("recordings: set segment_asr_model (or eval_asr_model), the recogniser that transcribes")
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
