"""The turns stage: a piece of a dialogue without a transcript cut where its voice changes without a pause the speech
detector takes (turns 60-300 ms apart). Between two of its 1.6 s windows clearly of different voices (diarize), it is
cut in the middle of a stretch of at least TURN_GAP s that is TURN_DB under the piece's loud level (of several, where
the voices on each side are most apart); with none (the voices overlap, or the gap is noise) it is not cut, and diarize
drops it as two voices. A turn too short for windows of its own at either end of a piece (a greeting, a quick reply) is
cut at such a stretch where the voice before it and the voice after it are clearly two. Each part is measured as a
piece of its own, and is tagged only if its own windows are of one voice.
"""

import dataclasses
import itertools

import numpy as np

from tpu_demo.segmenting.diarize import HOP, WINDOW, voice_centres, window_voice
from tpu_demo.segmenting.measure import Piece
from tpu_demo.segmenting.read import RATE, levelled, quiet_stretches

TURN_GAP, TURN_DB = 0.05, 30.0  # seconds of near silence between turns; how far under the piece's loud level
EDGE = 0.3  # seconds: a part is at least this long
TURN_WINDOWS = 2  # windows of one voice on each side of a change
SHORT_TURN = WINDOW + HOP  # seconds: a turn at a piece's end shorter than this has not TURN_WINDOWS windows of its own
REPLY_GAP, REPLY_SECONDS, REPLY_TRIES = 0.08, (0.3, 1.6), 16  # a reply inside a piece: its gaps, length, tries
SHORT_TURN_GAPS = 3  # the quiet stretches nearest each end of a piece where a short turn is looked for


def turn_cuts(pieces: list[Piece], audio16k: np.ndarray, encoder=None) -> dict[str, list[float]]:
    """Where each piece of two voices is cut (by its span, "start-end"), given the recording at 16 kHz; with the
    voice `encoder`, short turns at the pieces' ends too (`short_turns`)."""
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
                if (cut := gap_in(audio16k, piece, low, high, centres, encoder)) is not None:
                    found.append(cut)
        if encoder is not None:
            found += short_turns(piece, sorted(found), audio16k, centres, encoder)
            found += inner_replies(piece, sorted(found), audio16k, centres, encoder)
        if found:
            cuts[f"{piece.start:.3f}-{piece.end:.3f}"] = sorted(set(found))
    return cuts


def short_turns(piece: Piece, cuts: list[float], audio16k: np.ndarray, centres: np.ndarray, encoder) -> list[float]:
    """Cuts of `piece` (already cut at `cuts`) at a turn shorter than SHORT_TURN at its start or its end: at one of
    the SHORT_TURN_GAPS quiet stretches nearest that end (`gaps`) where that turn's voice and the voice of up to
    SHORT_TURN s on the other side (to the next cut) are clearly two (`two_voices`); of several, where the two sides
    are most apart (a pause inside the turn leaves some of it on the other side). With a cut at each end, what is
    between them must be clearly the other voice of each."""
    first, last = [*cuts, piece.end][0], [piece.start, *cuts][-1]  # the ends of the parts the turns would be in
    heads = gaps(audio16k, piece, piece.start, min(first, piece.start + SHORT_TURN))[:SHORT_TURN_GAPS]
    tails = gaps(audio16k, piece, max(last, piece.end - SHORT_TURN), piece.end)[::-1][:SHORT_TURN_GAPS]
    head = max((two_voices(audio16k, [(piece.start, cut), (cut, min(first, cut + SHORT_TURN))], centres, encoder)
                for _, cut in heads), default=None)  # fmt: skip
    tail = max((two_voices(audio16k, [(max(last, cut - SHORT_TURN), cut), (cut, piece.end)], centres, encoder)
                for _, cut in tails), default=None)  # fmt: skip
    head, tail = (found if found and found[0] > 0 else None for found in (head, tail))
    if head and tail and head[1] < tail[1]:
        between = window_voice(np.asarray(voice_at(audio16k, head[1], tail[1], encoder)), centres)
        head, tail = (head if between == head[2][1] else None), (tail if between == tail[2][0] else None)
    elif head and tail:  # the same stretch, or stretches crossed: the turn where the two sides are most apart
        head, tail = (head, None) if head[0] >= tail[0] else (None, tail)
    return [found[1] for found in (head, tail) if found]


def inner_replies(piece: Piece, cuts: list[float], audio16k: np.ndarray, centres: np.ndarray, encoder) -> list[float]:
    """Cuts around a reply inside a part of `piece` (between its `cuts`): a stretch of REPLY_SECONDS between two quiet
    stretches of at least REPLY_GAP s (a "Yes." 0.1 s after the other's sentence, which goes on 0.1 s later) whose
    voice is clearly another than that of up to SHORT_TURN s on each side (`window_voice`, each span encoded once);
    at most REPLY_TRIES such stretches a part, those between the longest quiet stretches first."""
    found, edges = [], [piece.start, *cuts, piece.end]
    for start, end in itertools.pairwise(edges):
        stretches = quiet_stretches(audio16k, start, end, TURN_DB, REPLY_GAP, EDGE)
        replies = [(first[1] - first[0] + last[1] - last[0], first, last)
                   for first, last in itertools.pairwise(stretches)
                   if REPLY_SECONDS[0] <= last[0] - first[1] <= REPLY_SECONDS[1]]  # fmt: skip
        for _, first, last in sorted(replies, reverse=True)[:REPLY_TRIES]:
            before, reply, after = (max(start, first[0] - SHORT_TURN), first[0]), (first[1], last[0]), (last[1], end)
            after = (after[0], min(end, after[0] + SHORT_TURN))
            if before[1] - before[0] < EDGE or after[1] - after[0] < EDGE:
                continue
            one, other = (
                window_voice(np.asarray(voice_at(audio16k, *span, encoder)), centres) for span in (before, reply)
            )
            if None in (one, other) or one == other:
                continue
            if window_voice(np.asarray(voice_at(audio16k, *after, encoder)), centres) not in (None, other):
                found += [round(sum(first) / 2, 3), round(sum(last) / 2, 3)]
    return found


def two_voices(audio16k: np.ndarray, spans: list[tuple[float, float]], centres: np.ndarray, encoder) -> tuple:
    """(how far apart, where they meet, their voices) of two spans of the recording (seconds), each of one voice
    clearly (`window_voice`: one encoding of each side, as short as it is): each side's similarity to its own voice
    over its similarity to the other's, added; 0 where they are not two voices."""
    voices = [np.asarray(voice_at(audio16k, start, end, encoder)) for start, end in spans]
    heard = [window_voice(voice, centres) for voice in voices]
    if None in heard or heard[0] == heard[1]:
        return 0.0, spans[0][1], heard
    contrast = sum(float(centres[own] @ voice - centres[other] @ voice)
                   for voice, own, other in zip(voices, heard, heard[::-1], strict=True))  # fmt: skip
    return contrast, spans[0][1], heard


def voice_at(audio16k: np.ndarray, start: float, end: float, encoder) -> list[float]:
    """The voice (GE2E, levelled as measure takes it) of the recording from `start` to `end` s."""
    return encoder(levelled(audio16k[int(start * RATE) : int(end * RATE)]))[0]


def gap_in(audio16k: np.ndarray, piece: Piece, low: float, high: float, centres=None, encoder=None) -> float | None:
    """The middle of the one of the `gaps` reaching between `low` and `high` s where the voices of up to SHORT_TURN s
    on each side are most apart (`two_voices`; a comma's pause inside the turn is longer than a quick turn's gap),
    else the longest; None where there is none."""
    found = gaps(audio16k, piece, low, high)
    if encoder is not None and len(found) > 1:
        start, end = piece.start, piece.end
        sides = [[(max(start, cut - SHORT_TURN), cut), (cut, min(end, cut + SHORT_TURN))] for _, cut in found]
        contrast, cut, _ = max(two_voices(audio16k, spans, centres, encoder) for spans in sides)
        if contrast > 0:
            return cut
    return max(found)[1] if found else None


def gaps(audio16k: np.ndarray, piece: Piece, low: float, high: float) -> list[tuple[float, float]]:
    """(length, middle) in seconds of each stretch of at least TURN_GAP s, TURN_DB under the piece's loud level
    (`quiet_stretches`, EDGE from its ends), that reaches between `low` and `high` s; in the order they come."""
    stretches = quiet_stretches(audio16k, piece.start, piece.end, TURN_DB, TURN_GAP, EDGE)
    return [(round(end - start, 2), round((start + end) / 2, 3)) for start, end in stretches
            if start <= high and end >= low]  # fmt: skip


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
