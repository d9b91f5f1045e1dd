"""The join stage: a recording's kept neighbouring pieces into clips of at most `max_clip_seconds` and
`max_text_tokens`, cut inside the pauses; a dropped piece is a dropped clip of its own, so a fault costs only it.
"""

import re
from dataclasses import dataclass, field

from tpu_demo.model.tokens import text_tokens
from tpu_demo.segmenting.align import TURN, joined_text
from tpu_demo.segmenting.measure import Piece
from tpu_demo.segmenting.read import Recording

EDGE = 0.15  # seconds of a pause kept at each end of a clip (half of a shorter pause)
JOIN_PAUSE = 2.0  # seconds: pieces further apart are never one clip (a clip would teach the model long silences)


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
    asr_confidence: float | None = None  # the recogniser's least, over its pieces' transcripts; None: one has none
    dropped: str | None = None  # why, in a few words (the report counts by them), for a clip that is not kept
    detail: str = ""  # the figures behind `dropped`
    dnsmos: dict = field(default_factory=dict)
    corrected: bool = False  # its text is the user's (corrections.csv)
    own_text: bool = False  # its text is its recording's own (NAME.txt), aligned or split through transcripts
    review: bool = False  # kept, its text a recogniser's, unchecked: in review.csv, not metadata.csv

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def recognised(self) -> bool:
        """Its text is a recogniser's: not aligned, not its recording's own, not the user's correction."""
        return self.alignment is None and not (self.own_text or self.corrected)


def with_margins(
    pieces: list[Piece], first: int, last: int, seconds: float, longest: float = float("inf")
) -> tuple[float, float]:
    """Where a clip of `pieces[first:last + 1]` starts and ends: up to EDGE into the pauses around it, never past half
    of one, the margins narrowed (alike, as far as each goes) so the clip is no longer than `longest` (pieces longer
    than that keep theirs: they are dropped as too long)."""
    before = pieces[first - 1].end if first else 0.0
    after = pieces[last + 1].start if last + 1 < len(pieces) else seconds
    lead = min(EDGE, (pieces[first].start - before) / 2, pieces[first].start)
    tail = min(EDGE, (after - pieces[last].end) / 2, seconds - pieces[last].end)
    excess = pieces[last].end - pieces[first].start + lead + tail - longest
    if 0 < excess <= lead + tail:  # a piece just under max_clip_seconds: its margins would make it too long
        cut = min(excess / 2, lead, tail)
        lead, tail, rest = lead - cut, tail - cut, excess - 2 * cut
        taken = min(lead, rest)  # what the narrower margin could not give, from the other
        lead, tail = lead - taken, max(0.0, tail - (rest - taken))
    return round(max(0.0, pieces[first].start - lead), 3), round(min(seconds, pieces[last].end + tail), 3)


def turns(piece: Piece) -> tuple[str | None, str | None]:
    """The speaker turns a piece's text starts and ends in (each part of an aligned or tagged text starts with its
    tag; a transcript's piece is its diarized turn)."""
    tags = [token for token in (piece.text or "").split() if TURN.match(token)]
    return (tags[0], tags[-1]) if tags else (piece.turn, piece.turn)


def last_turn(pieces: list[Piece], group: list[int]) -> list[int]:
    """The pieces of `group` from where its last turn starts (none where the group is one turn)."""
    for at in range(len(group) - 1, 0, -1):
        start, end = turns(pieces[group[at]])[0], turns(pieces[group[at - 1]])[1]
        if start is not None and start != end:
            return group[at:]
    return []


OTHER_SPEAKERS = re.compile(r"\[S(?:[03-9]|\d{2,})\]")  # Dia speaks as [S1] and [S2] only


def join(pieces: list[Piece], recording: Recording, seconds: float, settings, max_text_tokens=None) -> list[Clip]:
    """Clips of neighbouring kept pieces, at most `max_clip_seconds` with their margins and `max_text_tokens` of text
    (training drops a longer text), no pause longer than JOIN_PAUSE inside nor a sound in a pause; each dropped piece
    a dropped clip of its own, a piece whose text alone is too long dropped as `text too long`, and a clip whose text
    has a third speaker's tag (`[S3]`) as `third speaker`. A clip's margins
    are up to EDGE of the pauses around it, never past half of one."""

    def too_much_text(numbers) -> bool:
        return (
            bool(max_text_tokens)
            and text_tokens(joined_text([pieces[i].text or "" for i in numbers])) > max_text_tokens
        )

    def too_long(numbers) -> bool:
        return pieces[numbers[-1]].end - pieces[numbers[0]].start + 2 * EDGE > settings.max_clip_seconds

    groups, group = [], []  # runs of indices into `pieces`
    for number, piece in enumerate(pieces):
        if piece.dropped:
            groups += [group] if group else []
            groups.append([number])
            group = []
        elif group and (piece.start - pieces[group[-1]].end > JOIN_PAUSE or piece.sound_before):
            groups.append(group)
            group = [number]
        elif group and (too_long([*group, number]) or too_much_text([*group, number])):
            # a clip of a dialogue holds whole turns: the turn it would end inside starts the next clip
            carried = last_turn(pieces, group)
            if carried and len(carried) < len(group) and not too_long([*carried, number]):
                if not too_much_text([*carried, number]):
                    groups.append(group[: -len(carried)])
                    group = [*carried, number]
                    continue
            groups.append(group)
            group = [number]
        else:
            group.append(number)
    groups += [group] if group else []
    clips = []
    for numbers in groups:
        group = [pieces[number] for number in numbers]
        span = with_margins(pieces, numbers[0], numbers[-1], seconds, settings.max_clip_seconds)
        clip = Clip(recording.name, *span, recording.speaker, own_text=recording.text is not None)
        clip.text = joined_text([piece.text for piece in group])
        clip.transcript = " ".join(piece.transcript or "" for piece in group).strip()
        snrs = [piece.snr_db for piece in group if piece.snr_db is not None]
        clip.snr_db = min(snrs) if snrs else None
        confidences = [piece.alignment for piece in group if piece.alignment is not None]
        clip.alignment = min(confidences) if confidences else None
        heard = [piece.asr_confidence for piece in group]
        clip.asr_confidence = None if None in heard else min(heard)
        widths = [piece.bandwidth_hz for piece in group if piece.bandwidth_hz is not None]
        clip.bandwidth_hz = min(widths) if widths else None
        clip.dnsmos = {key: min(piece.dnsmos[key] for piece in group) for key in group[0].dnsmos}
        clip.dropped, clip.detail = group[0].dropped, group[0].detail
        if not clip.dropped and clip.seconds < settings.min_clip_seconds:
            clip.dropped, clip.detail = "too short", f"{clip.seconds:.2f} s < min_clip_seconds"
        elif not clip.dropped and (others := sorted(set(OTHER_SPEAKERS.findall(clip.text or "")))):
            clip.dropped, clip.detail = "third speaker", f"{', '.join(others)}: Dia speaks as [S1] and [S2] only"
        elif not clip.dropped and too_much_text(numbers):
            clip.dropped = "text too long"
            clip.detail = f"{text_tokens(clip.text)} Dia tokens > max_text_tokens {max_text_tokens}"
        clips.append(clip)
    return clips
