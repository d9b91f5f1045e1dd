"""The judge stage: each piece dropped by the measure that decides (length, clipping, band, SNR, DNSMOS, its
speaker's voice, a second voice over it); clips off their speaker's pace.
"""

import numpy as np

from tpu_demo.segmenting.align import aligns, spoken_characters
from tpu_demo.segmenting.join import Clip
from tpu_demo.segmenting.measure import Piece
from tpu_demo.segmenting.read import Recording

MIN_BANDWIDTH_HZ = 6000.0  # a narrower piece (telephone 3.4 kHz, AM radio 5 kHz) would teach a full-band codec muffled
DIARIZE_SIMILARITY = 0.75  # pieces whose voices are this similar on average are one voice (min_speaker_similarity's)
VOICE_SECONDS = 1.0  # a shorter piece's voice embedding is too uncertain to judge it by (GE2E: 1.6 s windows)
OVERLAP_SPREAD = 5.0  # robust deviations under its speaker's usual window: a piece's least similar 1.6 s window
LEAST_SPREAD = 0.02  # the smallest such deviation counted: one synthetic voice's windows vary by less than a person's
OVERLAP_PIECES = 6  # pieces of a voice needed to tell its usual windows: a dialogue's voice of 4 dropped clean ones
OVERLAP_BAK = 0.5  # DNSMOS BAK under its speaker's usual: a second talker is background to DNSMOS
MUSIC_SHARE = 0.25  # a piece whose pauses hold this share of music's frames (measure.music_around) has music under it
MUSIC_DB = 40.0  # unless its SNR is over this: music that far under the voice is not heard over a room


def voice_changes_at_step(piece: Piece) -> bool:
    """Whether the piece's voice before its level step and after it (`measure.step_voices`) are less alike than one
    speaker's pieces (DIARIZE_SIMILARITY): the step is a change of speaker, which levelling the clip fixes, not a gain
    knob turned mid-word."""
    if len(piece.fault_voices) != 2:
        return False
    one, other = (np.asarray(voice) for voice in piece.fault_voices)
    return float(one @ other) < DIARIZE_SIMILARITY


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
        if piece.end - piece.start < VOICE_SECONDS and piece.snr_db is not None:
            bak = ovrl = 5.0  # DNSMOS hears a piece under a second repeated: its measured SNR judges its noise
        if piece.end - piece.start > settings.max_clip_seconds:
            piece.dropped, piece.detail = "too long", f"no pause within max_clip_seconds {settings.max_clip_seconds}"
        elif piece.clipped > settings.max_clipped_share:
            piece.dropped, piece.detail = "clipping", f"{piece.clipped:.2%} of its samples held flat at full scale"
        elif piece.fault and not (piece.fault == "level step" and voice_changes_at_step(piece)):
            piece.dropped, piece.detail = piece.fault, piece.fault_detail
        elif piece.bandwidth_hz is not None and piece.bandwidth_hz < MIN_BANDWIDTH_HZ:
            piece.dropped = "band-limited"
            piece.detail = f"bandwidth {piece.bandwidth_hz / 1000:.1f} kHz < {MIN_BANDWIDTH_HZ / 1000:.0f} kHz"
        elif piece.snr_db is not None and piece.snr_db < settings.min_snr_db:
            piece.dropped, piece.detail = "noisy", f"SNR {piece.snr_db:.1f} dB < min_snr_db {settings.min_snr_db}"
        elif (piece.music or 0.0) >= MUSIC_SHARE and (piece.snr_db is None or piece.snr_db < MUSIC_DB):
            piece.dropped = "music"
            piece.detail = (
                f"music under it: {piece.music:.0%} of the pauses around it hold sustained tones of changing notes"
            )
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


def speaker_voice(kept: list[Piece]) -> tuple[np.ndarray, list[Piece]]:
    """A speaker's voice: the mean of the half of its pieces nearest the mean of all, so that other voices and faults
    do not pull it; and those pieces (its confident ones)."""
    voices = np.array([piece.voice for piece in kept])
    confident = [kept[index] for index in np.argsort(-(voices @ voices.mean(axis=0)))[: max(2, (len(kept) + 1) // 2)]]
    return mean_voice(confident), confident


def mean_voice(pieces: list[Piece]) -> np.ndarray:
    """The unit mean of the pieces' voice embeddings."""
    mean = np.mean([piece.voice for piece in pieces], axis=0)
    return mean / np.linalg.norm(mean)


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
    if len(kept) < OVERLAP_PIECES:
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
                    f"its least similar 1.6 s {least[id(piece)]:.3f} to its speaker, under {cut:.3f} (its speaker's "
                    f"confident pieces: {median:.2f}, deviation {spread:.3f}), and DNSMOS BAK "
                    f"{piece.dnsmos['bak']:.2f}, under {bak - OVERLAP_BAK:.2f} (its recording's others: {bak:.2f})"
                )


def drop_unusual_pace(clips: list[Clip], tolerance: float, language: str | None = None) -> None:
    """Drops the kept clips whose seconds per character are more than `tolerance` times off the median of their
    speaker's kept clips (of their recording where it has no speaker folder): one speaker's pace is not another's."""
    speakers = {}
    for clip in clips:
        if not clip.dropped:
            speakers.setdefault(clip.speaker or clip.recording, []).append(clip)
    for kept in speakers.values():
        drop_off_pace(kept, tolerance, language)


def drop_off_pace(kept: list[Clip], tolerance: float, language: str | None = None) -> None:
    paces = [clip.seconds / max(spoken_characters(clip.text, language), 1) for clip in kept]
    median = float(np.median(paces))
    for clip, pace in zip(kept, paces, strict=True):
        if not median / tolerance <= pace <= median * tolerance:
            low, high = median / tolerance, median * tolerance
            clip.dropped, clip.detail = "unusual pace", f"{pace:.3f} s per character, outside {low:.3f}..{high:.3f}"
