"""Subtitles beside a recording (NAME.srt, NAME.vtt) read as its text: the cues' words in order, a WebVTT voice
(`<v Anna>`) a speaker turn (`[S1]` the first voice heard, `[S2]` the next), and each cue's times, which anchor the
alignment (align.align_text) to where the cue is said. Read by webvtt-py (`speech` extra)."""

import html
import re
from dataclasses import dataclass
from pathlib import Path

from tpu_demo.errors import FineTuneError

SUFFIXES = (".vtt", ".srt")
ANNOTATION = re.compile(r"\[[^\]]*\]|\{[^}]*\}|<[^>]*>|♪")  # [MUSIC], {\an8}, <i>, a note: not said


@dataclass
class Cue:
    start: float  # seconds in the recording
    end: float
    text: str  # as written, a speaker turn first where the voice changes


def read_cues(path: Path) -> list[Cue]:
    """The cues of a .srt or .vtt file, in their order; refused in one line where the file cannot be read."""
    try:
        import webvtt
    except ImportError as error:
        raise FineTuneError(f"{path.name}: subtitles are read by webvtt-py: pip install '.[speech]'") from error
    try:
        captions = webvtt.from_srt(str(path)) if path.suffix.lower() == ".srt" else webvtt.read(str(path))
    except (webvtt.errors.MalformedFileError, UnicodeDecodeError, ValueError) as error:
        raise FineTuneError(f"{path.name}: not subtitles webvtt-py can read ({error})") from None
    voices, cues, turn = {}, [], None
    for caption in captions:
        words = " ".join(ANNOTATION.sub(" ", html.unescape(caption.text)).split())
        if not words:
            continue
        voice = getattr(caption, "voice", None)
        if voice is not None:
            tag = voices.setdefault(voice, f"[S{len(voices) + 1}]")
            words, turn = (words if tag == turn else f"{tag} {words}"), tag
        start, end = caption.start_time.in_milliseconds() / 1000, caption.end_time.in_milliseconds() / 1000
        cues.append(Cue(start, end, words))
    return cues


def subtitle_files(files: list[Path]) -> dict[Path, Path]:
    """The subtitle files among `files`, by the recording they would be beside (its path without a suffix); a .vtt
    before a .srt of the same name."""
    found = {}
    for path in sorted(files, key=lambda p: SUFFIXES.index(p.suffix.lower()) if p.suffix.lower() in SUFFIXES else 9):
        if path.suffix.lower() in SUFFIXES:
            found.setdefault(path.with_suffix(""), path)
    return found
