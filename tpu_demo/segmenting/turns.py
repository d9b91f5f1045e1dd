"""The turns stage: a piece of a dialogue without a transcript cut where its voice changes without a pause the speech
detector takes (turns 60-300 ms apart). Between two of its 1.6 s windows clearly of different voices (diarize), it
is cut in the middle of the longest stretch of at least TURN_GAP s that is TURN_DB under the piece's loud level; with
none (the voices overlap, or the gap is noise) it is not cut, and diarize drops it as two voices. Each part is
measured as a piece of its own, and is tagged only if its own windows are of one voice.
"""

import dataclasses
import itertools

import numpy as np

from tpu_demo.segmenting.diarize import WINDOW, voice_centres, window_voice
from tpu_demo.segmenting.measure import Piece
from tpu_demo.segmenting.read import RATE

TURN_GAP, TURN_DB = 0.05, 30.0  # seconds of near silence between turns; how far under the piece's loud level
HOP = 0.77  # seconds between a piece's GE2E windows (Resemblyzer's partials: 1.3 a second, WINDOW s each)
EDGE = 0.3  # seconds: a part is at least this long
TURN_WINDOWS = 2  # windows of one voice on each side of a change


def turn_cuts(pieces: list[Piece], audio16k: np.ndarray) -> dict[str, list[float]]:
    """Where each piece of two voices is cut (by its span, "start-end"), given the recording at 16 kHz."""
    centres, cuts = voice_centres(pieces)[0], {}
    if len(centres) < 2:
        return {}
    for piece in pieces:
        if piece.dropped or len(piece.voice_windows or []) < 2:
            continue
        clear = [(number, voice) for number, window in enumerate(piece.voice_windows)
                 if (voice := window_voice(np.asarray(window), centres)) is not None]  # fmt: skip
        found = []
        for index, ((before, one), (after, other)) in enumerate(itertools.pairwise(clear)):
            # a change between two windows each of a voice held over TURN_WINDOWS windows (a laugh, a shout is
            # heard as another voice for a window)
            held = clear[max(0, index + 1 - TURN_WINDOWS) : index + 1 + TURN_WINDOWS]
            if (
                one != other
                and len(held) == 2 * TURN_WINDOWS
                and len({voice for _, voice in held[:TURN_WINDOWS]}) == 1
                and len({voice for _, voice in held[TURN_WINDOWS:]}) == 1
            ):  # the change lies between their middles
                low = piece.start + before * HOP + WINDOW / 2
                high = piece.start + after * HOP + WINDOW / 2
                if (cut := gap_in(audio16k, piece, low, high)) is not None:
                    found.append(cut)
        if found:
            cuts[f"{piece.start:.3f}-{piece.end:.3f}"] = sorted(set(found))
    return cuts


def gap_in(audio16k: np.ndarray, piece: Piece, low: float, high: float) -> float | None:
    """The middle of the longest stretch that reaches between `low` and `high` s (EDGE from the piece's ends) whose
    10 ms windows are all TURN_DB under the piece's loud level (its 90th percentile), if TURN_GAP s or longer."""
    size = RATE // 100
    samples = audio16k[int(piece.start * RATE) : int(piece.end * RATE)].astype(np.float64)
    windows = samples[: len(samples) // size * size].reshape(-1, size)
    if not len(windows):
        return None
    level = 10 * np.log10(np.mean(windows**2, axis=1) + 1e-12)
    quiet = level < np.percentile(level, 90) - TURN_DB
    quiet[: int(EDGE * 100)] = quiet[len(quiet) - int(EDGE * 100) :] = False
    first, last = int((low - piece.start) * 100), int((high - piece.start) * 100)
    edges = np.flatnonzero(np.diff(np.concatenate([[0], quiet.astype(np.int8), [0]])))
    runs = [(stop - start, start, stop) for start, stop in zip(edges[::2], edges[1::2], strict=True)
            if stop - start >= TURN_GAP * 100 and start <= last and stop >= first]  # fmt: skip
    if not runs:
        return None
    _, start, stop = max(runs)
    return round(piece.start + (start + stop) / 200, 3)


def cut_at_turns(pieces: list[Piece], cuts: dict[str, list[float]]) -> list[Piece]:
    """The pieces, each one `cuts` names replaced by its parts: its measures but those of its own (DNSMOS, voice),
    which are taken of each part."""
    found = []
    for piece in pieces:
        times = cuts.get(f"{piece.start:.3f}-{piece.end:.3f}")
        if not times or piece.dropped:
            found.append(piece)
            continue
        edges = [piece.start, *times, piece.end]
        for number, (start, end) in enumerate(itertools.pairwise(edges)):
            found.append(dataclasses.replace(piece, start=start, end=end, dnsmos={}, voice=[], voice_windows=[],
                                             sound_before=piece.sound_before and not number))  # fmt: skip
    return found
