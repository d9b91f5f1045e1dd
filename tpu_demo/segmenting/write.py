"""The write stage: the kept clips as WAVs (BS.1770 loudness), metadata.csv, segment_report.json and its summary
lines; the user's edits of metadata.csv kept in corrections.csv and applied on every run.
"""

import csv
import hashlib
import io
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from tpu_demo.data.metadata import (
    clip_path,
    decode,
    lost_characters,
    read_corrections_table,
    read_edits,
    read_table,
    same_text,
)
from tpu_demo.errors import FineTuneError
from tpu_demo.segmenting.join import Clip
from tpu_demo.segmenting.page import PAGE
from tpu_demo.segmenting.read import heard, levelled, without_dc
from tpu_demo.segmenting.settings import CORRECTIONS, PARTS, REPORT, REVIEW

CHECKED = ("yes", "y", "x", "true", "1", "ok")  # a review.csv row the user proofread, its text as it is


def text_digest(text: str) -> str:
    """A table's digest, whatever its line ends (csv writes CRLF; an editor may save LF)."""
    return hashlib.sha256("\n".join(text.splitlines()).encode()).hexdigest()


def read_corrections(out: Path, allow_removals: bool = False) -> tuple[dict[tuple, str | None], str | None]:
    """The user's texts by clip (recording, start, end), None for a clip removed: those of corrections.csv, and the
    rows of metadata.csv edited or deleted since the last run wrote it, which join them; and metadata.csv's text as
    it is now (None: there is none). A table that cannot be read as written is refused (tpu_demo.data.metadata)."""
    path, corrections = out / CORRECTIONS, {}
    if path.is_file():
        corrections = read_corrections_table(path)
    corrections |= read_review(out)
    metadata = out / "metadata.csv"
    if not metadata.is_file():
        return corrections, None
    table, _ = decode(metadata)
    if not (out / REPORT).is_file():
        raise FineTuneError(
            f"{metadata}: no {REPORT} beside it, which tells your edits from what was written; move metadata.csv "
            "out of the folder and run again (nothing was changed or deleted)"
        )
    previous = json.loads((out / REPORT).read_text())
    # as written, or the one a run stopped before replacing: no edit
    if text_digest(table) in (previous.get("metadata_sha256"), previous.get("replaces_sha256")):
        return corrections, table
    clips = previous.get("clips", [])
    written = {clip["audio"]: clip for clip in clips if clip.get("audio") and not clip.get("dropped")
               and not clip.get("review")}  # fmt: skip
    edits = read_edits(metadata, {audio: clip["text"] for audio, clip in written.items()}, allow_removals)
    for audio, clip in written.items():
        key = (clip["recording"], clip["start"], clip["end"])
        if audio in edits.removed:
            corrections[key] = None
        elif audio in edits.texts:
            corrections[key] = edits.texts[audio]
    return corrections, table


def read_review(out: Path) -> dict[tuple, str]:
    """The texts the user proofread in review.csv, by clip (recording, start, end): a row whose text was edited, or
    whose `checked` column says yes. A row of no clip the last run listed there, or whose text lost characters to a
    code page, is refused; a deleted row leaves its clip to review."""
    path = out / REVIEW
    if not path.is_file() or not (out / REPORT).is_file():
        return {}
    listed = {clip["audio"]: clip for clip in json.loads((out / REPORT).read_text()).get("clips", [])
              if clip.get("review") and clip.get("audio")}  # fmt: skip
    checked = {}
    for line, row in read_table(path, ("audio", "text")).rows:
        audio, text = clip_path(row.get("audio") or ""), " ".join((row.get("text") or "").split())
        if audio not in listed:
            raise FineTuneError(
                f"{path} line {line}: `{audio}` is no clip the last run listed for review; nothing was changed"
            )
        written = listed[audio]["text"]
        edited = same_text(text) != same_text(written)
        if edited and lost_characters(same_text(text), same_text(written)):
            raise FineTuneError(
                f"{path} line {line}: its text lost characters to `?` ({written!r} was written): saved in a code page "
                "that cannot hold them; save it as CSV UTF-8 (nothing was changed)"
            )
        if text and (edited or (row.get("checked") or "").strip().lower() in CHECKED):
            checked[(listed[audio]["recording"], listed[audio]["start"], listed[audio]["end"])] = text
    return checked


def for_review(kept: list[Clip], settings) -> list[Clip]:
    """The kept clips whose text is a recogniser's, unchecked (not their recording's own text, aligned or split
    through the transcripts; nor corrected by the user), and the recogniser not sure of it (`min_asr_confidence`):
    to review.csv, not metadata.csv, unless `train_on_unchecked_text`."""
    if settings.train_on_unchecked_text:
        return []
    review = [clip for clip in kept if clip.recognised and not trusted(clip, settings)]
    for clip in review:
        clip.review = True
    return review


def trusted(clip: Clip, settings) -> bool:
    """Whether the recogniser was sure of every word of the clip's transcript (a transformers recogniser's)."""
    return clip.asr_confidence is not None and clip.asr_confidence >= settings.min_asr_confidence


def write_review(review: list[Clip], out: Path, language) -> None:
    """review.csv: metadata.csv's columns and `checked`; none left to review, none (its edits were read first)."""
    path = out / REVIEW
    if not review:
        path.unlink(missing_ok=True)
        return
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["audio", "text", "speaker", "language", "checked"])
    writer.writerows([clip.audio, clip.text, clip.speaker or "", language or "", ""] for clip in review)
    path.write_text(table.getvalue(), encoding="utf-8")


def apply_corrections(clips, corrections: dict[tuple, str | None]) -> int:
    """The user's texts, and removals, on the kept clips they name; returns how many applied."""
    applied = 0
    for clip in clips:
        key = (clip.recording, clip.start, clip.end)
        if key in corrections and not clip.dropped:
            text = corrections[key]
            if text is None:
                clip.dropped = "removed by you"
            else:
                clip.text, clip.corrected = text, True
            applied += 1
    return applied


def write_clips(kept, recordings, out: Path, target_lufs) -> None:
    """The kept clips as WAVs at `target_lufs`; clips no longer kept leave the folder."""
    of = {recording.name: recording for recording in recordings}
    for clip in kept:
        write_clip(clip, of[clip.recording].audio, out, target_lufs, of[clip.recording].channel)
    written = {clip.audio for clip in kept}
    for wav in (out / "clips").rglob("*.wav") if (out / "clips").is_dir() else []:
        if str(wav.relative_to(out)) not in written:  # dropped now, or left by other settings
            wav.unlink()


def metadata_table(kept, language) -> str:
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(["audio", "text", "speaker", "language"])
    writer.writerows([clip.audio, clip.text, clip.speaker or "", language or ""] for clip in kept)
    return table.getvalue()


def report_lines(summary: dict, out: Path) -> list[str]:
    kept = summary["kept"]
    total = kept["seconds"] + sum(reason["seconds"] for reason in summary["dropped"].values())
    dropped = "; ".join(f"{name} {d['clips']} ({d['seconds']:.1f} s)" for name, d in summary["dropped"].items())
    speakers = "; ".join(
        f"{name if name != '-' else 'no speaker folder'} {s['clips']} ({s['seconds']:.1f} s)"
        for name, s in summary["speakers"].items()
    )
    review = summary["review"]
    to_review = (
        f": {kept['clips'] - review['clips']} in metadata.csv, {review['clips']} to review ({review['seconds']:.1f} s)"
    )
    lines = [
        f"{summary['recordings']} recordings, {total:.1f} s of speech cut into clips: kept {kept['clips']} clips "
        f"({kept['seconds']:.1f} s)" + (to_review if review["clips"] else ""),
        f"dropped: {dropped or 'none'}",
        f"kept per speaker: {speakers or 'none'}",
    ]
    if mostly := summary.get("mostly_dropped"):
        listed = "; ".join(
            f"{name} {held['kept']:.1f} of {held['seconds']:.1f} s ("
            + ", ".join(f"{reason} {count}" for reason, count in held["reasons"].items()) + ")"
            for name, held in sorted(mostly.items())
        )  # fmt: skip
        lines.append(f"recordings that kept under half their speech: {listed}: see why on {out / PAGE}")
    if channels := summary.get("channels"):
        listed = "; ".join(f"{name}: {channel}" for name, channel in sorted(channels.items()))
        lines.append(f"read from the channel that holds the speech (the others' are noise): {listed}")
    if voices := summary.get("voices"):
        several = {name: count for name, count in voices.items() if count > 1}
        listed = "; ".join(f"{name} {count}" for name, count in sorted(several.items()))
        lines.append(f"voices: {len(voices) - len(several)} recordings of one" + (f"; {listed}" if listed else ""))
    aligned, unchecked = summary["aligned"], summary["unchecked"]
    if aligned["clips"]:
        lines.append(
            f"texts aligned to their audio: {aligned['clips']} clips, the least alignment confidence "
            f"{aligned['least_confidence']:.2f}"
        )
    if unchecked["clips"]:
        lines.append(
            f"{unchecked['clips']} kept clips ({unchecked['seconds']:.1f} s) carry the recogniser's transcript, "
            "unchecked (no NAME.txt beside their recordings): proofread them in metadata.csv, or give the "
            "recordings their text, which is aligned"
        )
    recognised = summary.get("recognised", {"clips": 0})
    if recognised["clips"]:
        lines.append(
            f"{recognised['clips']} kept clips carry the recogniser's transcript, each word's tokens at a probability "
            f"of {recognised['least_confidence']:.2f} or more (min_asr_confidence): listen to some on {PAGE}"
        )
    lines += review_lines(summary, out)
    unmeasured = summary["unmeasured_snr"]
    if unmeasured["clips"]:
        lines.append(
            f"{unmeasured['clips']} kept clips ({unmeasured['seconds']:.1f} s) have no SNR: their recordings hold no "
            "pause of 0.3 s to measure the noise in (a file trimmed to its speech), so only DNSMOS judged their "
            "noise: listen to them, or keep the recordings' pauses"
        )
    corrections = summary["corrections"]
    if corrections["applied"] or corrections["unmatched"]:
        lines.append(
            f"your corrections: {corrections['applied']} applied; {corrections['unmatched']} match no clip cut "
            f"with these settings (kept in {out / CORRECTIONS})"
        )
    return [
        *lines,
        f"dataset: {out / 'metadata.csv'}; every clip and why it was dropped: {out / REPORT}; to listen to them: "
        f"{out / PAGE}",
    ]


def review_lines(summary: dict, out: Path) -> list[str]:
    """What the summary says of the clips sent to review.csv, and of the recogniser whose words they carry."""
    review = summary.get("review", {"clips": 0})
    if not review["clips"]:
        return []
    lines = [
        f"{review['clips']} clips ({review['seconds']:.1f} s) carry the recogniser's transcript, unchecked (no "
        f"NAME.txt beside their recordings): they are in {out / REVIEW}, not in metadata.csv. Proofread them (a "
        "corrected text, or yes in `checked`, joins metadata.csv on the next run), give the recordings their "
        "text, or set train_on_unchecked_text: true to train on them as they are"
    ]
    if summary.get("segment_settings", {}).get("segment_asr_model") == "pocketsphinx":
        lines.append(
            "the offline recogniser (pocketsphinx) gets most clips' words wrong: for better transcripts set "
            "segment_asr_model: openai/whisper-small (downloaded once), or give each recording its NAME.txt"
        )
    else:
        lines.append(
            "the recogniser was less sure than min_asr_confidence of a word in each of these (its probability per "
            f"clip is on {PAGE}); if most are right, a lower min_asr_confidence, or train_on_unchecked_text: true, "
            "puts them in metadata.csv"
        )
    return lines


def write_clip(clip: Clip, path: Path, out_dir: Path, target_lufs: float, channel: int | None = None) -> None:
    """The clip's audio from the recording at `path` (its `channel`, else its channels mixed), without DC,
    loudness-normalised, as 16-bit WAV at the recording's rate."""
    import soundfile

    rate = soundfile.info(str(path)).samplerate
    audio, _ = soundfile.read(
        str(path), start=int(clip.start * rate), stop=int(clip.end * rate), dtype="float32", always_2d=True
    )
    clip.audio = f"clips/{clip.recording}-{round(clip.start * 100):07d}.wav"
    target = out_dir / clip.audio
    target.parent.mkdir(parents=True, exist_ok=True)
    mono = without_dc(heard(audio, channel), rate)
    soundfile.write(str(target), loudness_normalised(mono, rate, target_lufs), rate, subtype="PCM_16")


MOSTLY = 0.5  # a recording that keeps less than this share of its speech is named in the summary


def summarise(clips: list[Clip], recordings: int) -> dict:
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
    heard = [clip for clip in kept if clip.recognised and not clip.review]
    unchecked = [clip for clip in heard if clip.asr_confidence is None]
    recognised = [clip.asr_confidence for clip in heard if clip.asr_confidence is not None]
    review = [clip for clip in kept if clip.review]
    unmeasured = [clip for clip in kept if clip.snr_db is None]
    by_recording = {}
    for clip in clips:
        held = by_recording.setdefault(clip.recording, {"kept": 0.0, "seconds": 0.0, "reasons": {}})
        held["seconds"] += clip.seconds
        if clip.dropped:
            held["reasons"][clip.dropped] = held["reasons"].get(clip.dropped, 0) + 1
        else:
            held["kept"] += clip.seconds

    def tally(some: list[Clip]) -> dict:
        return {"clips": len(some), "seconds": round(sum(clip.seconds for clip in some), 2)}

    return {
        "recordings": recordings,
        "kept": tally(kept),
        "aligned": {"clips": len(aligned), "least_confidence": min(aligned, default=None)},
        "unchecked": tally(unchecked),
        "recognised": {"clips": len(recognised), "least_confidence": min(recognised, default=None)},
        "review": tally(review),
        "unmeasured_snr": tally(unmeasured),
        "dropped": {reason: {"clips": n, "seconds": round(s, 2)} for reason, (n, s) in reasons.items()},
        "speakers": {speaker: {"clips": n, "seconds": round(s, 2)} for speaker, (n, s) in speakers.items()},
        "mostly_dropped": {
            name: {"kept": round(held["kept"], 2), "seconds": round(held["seconds"], 2), "reasons": held["reasons"]}
            for name, held in by_recording.items()
            if held["kept"] < MOSTLY * held["seconds"]
        },
        "clips": [asdict(clip) for clip in clips],
    }


def loudness_normalised(audio: np.ndarray, rate: int, target_lufs: float) -> np.ndarray:
    """`audio` at `target_lufs` integrated loudness (BS.1770; `levelled`: RMS for a clip under its 0.4 s), its peak
    kept at or below -1 dBFS."""
    audio = levelled(np.asarray(audio, dtype=np.float32), rate, target_lufs)
    peak = float(np.abs(audio).max(initial=0.0))
    return (audio * np.float32(min(1.0, 10 ** (-1 / 20) / peak)) if peak else audio).astype(np.float32)


def output_folder(config) -> Path:
    """The `dataset` folder the clips go to: new, or one this command wrote; never inside the recordings."""
    out, source = Path(config.data.dataset).resolve(), Path(config.recordings.recordings).resolve()
    if out == source or source in out.parents or out in source.parents:
        raise FineTuneError(f"dataset {config.data.dataset}: must be a folder apart from the recordings {source}")
    if out.is_dir() and any(out.iterdir()) and not ((out / PARTS).is_dir() or (out / REPORT).is_file()):
        raise FineTuneError(
            f"dataset {config.data.dataset}: holds files tpu_demo.segment did not write; give a new folder"
        )
    return out
