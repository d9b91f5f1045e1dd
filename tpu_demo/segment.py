"""Long recordings to a dataset: cut at pauses, judged, transcribed, joined (`recordings` in the YAML; docs/DATA.md).

    python -m tpu_demo.segment my.yaml [key=value ...]
    accelerate launch -m tpu_demo.segment my.yaml              # the recordings shared by several processes

Writes the `dataset` folder (a new one): clips/, metadata.csv (audio,text,speaker,language), which training reads, and
segment_report.json: what was kept, what was dropped and why. Each stage is cached by its own settings: run again
after an interruption or a change, only what the change touches is done again (a join setting never re-runs the
models). Texts corrected and rows deleted in metadata.csv are kept, in corrections.csv, and applied on every run.
"""

import collections
import contextlib
import csv
import dataclasses
import hashlib
import io
import json
import os
import sys
import time
from pathlib import Path

from accelerate import PartialState
from accelerate.utils import parse_flag_from_env

from tpu_demo.cli import config_parser, fail, refuse_unsupported_transformers, say
from tpu_demo.data.metadata import ALLOW_REMOVALS, decode, read_corrections_table, read_edits, write_corrections_table
from tpu_demo.data.segmenting import (
    ALIGN_SILENCE,
    CORRECTIONS,
    PARTS,
    REPORT,
    SPOKEN_TOKENS_PER_SECOND,
    Piece,
    align_text,
    alignment_key,
    aligns,
    clip_settings,
    codec_frame_rate,
    drop_other_voices,
    drop_unusual_pace,
    find_recordings,
    give_texts,
    join,
    judge,
    needs_transcript,
    quality,
    recogniser,
    recordings_digest,
    report,
    segment_settings,
    settings_fingerprint,
    text_tokens_for,
    with_margins,
    write_clip,
)
from tpu_demo.data.speech_models import missing_package
from tpu_demo.errors import FineTuneError
from tpu_demo.evaluation.intelligibility import normalise

STAGES = 4  # the version of what the stages store: a change here redoes them all
MEASURES = 2  # the version of the costly measures (DNSMOS at a piece's own length, the voice with its windows)
TRANSCRIBED_COST = 5.0  # a recording's work if the recogniser hears it, over its work if its text is aligned
TIMES = collections.Counter()  # seconds this process spent in each stage this run (the main one: all processes)


@contextlib.contextmanager
def timed(stage: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        TIMES[stage] += time.perf_counter() - start


def timing(stage: str, model):
    """`model`, its calls timed as `stage`."""

    def call(*args, **kwargs):
        with timed(stage):
            return model(*args, **kwargs)

    return call


def key(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


class Stages:
    """One recording's stage results in DATASET/.segmenting/<id>/, each under the key of what it was made from."""

    def __init__(self, recording, out: Path, settings, asr_model: str):
        self.folder = out / PARTS / hashlib.sha256(recording.name.encode()).hexdigest()[:16]
        stat = recording.path.stat()
        cut = (settings.vad_threshold, settings.min_pause_seconds, settings.max_clip_seconds)
        self.pieces_key = key(STAGES, "pieces", stat.st_size, stat.st_mtime_ns, *cut)
        self.transcripts_key = key(self.pieces_key, asr_model, settings.segment_language)
        self.quality_key = key(self.pieces_key, MEASURES)

    def load(self, stage: str, stage_key: str):
        path = self.folder / f"{stage}.json"
        found = json.loads(path.read_text()) if path.is_file() else {}
        return found.get("value") if found.get("key") == stage_key else None

    def save(self, stage: str, stage_key: str, value) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f"{stage}.{os.getpid()}.tmp"
        partial.write_text(json.dumps({"key": stage_key, "value": value}))
        partial.replace(self.folder / f"{stage}.json")  # whole or absent: an interrupted stage is done again

    def pieces(self) -> tuple[list[Piece], float] | None:
        found = self.load("pieces", self.pieces_key)
        return ([Piece(**piece) for piece in found["pieces"]], found["seconds"]) if found else None


class Models:
    """The models, each loaded the first time a stage needs it (a rerun with nothing to do loads none)."""

    def __init__(self, config, device: str):
        self.config, self.device, self.loaded = config, device, {}

    def get(self, name: str):
        if name not in self.loaded:
            with timed(f"load {name}"):
                self.load(name)
        return timing(name, self.loaded[name])

    def load(self, name: str) -> None:
        if name not in self.loaded:
            from tpu_demo.data import speech_models

            settings = self.config.recordings
            if name == "vad":
                threshold, pause = settings.vad_threshold, settings.min_pause_seconds
                self.loaded[name] = speech_models.SpeechDetector(threshold, pause, settings.max_clip_seconds)
            elif name == "dnsmos":
                self.loaded[name] = speech_models.QualityJudge()
            elif name == "voice":
                self.loaded[name] = speech_models.VoiceEncoder()
            elif name == "aligner":
                self.loaded[name] = speech_models.Aligner(max(ALIGN_SILENCE, settings.min_pause_seconds + 0.15))
            elif recogniser(self.config) == "pocketsphinx":
                self.loaded[name] = speech_models.Pocketsphinx(settings.segment_language)
            else:
                from tpu_demo.evaluation.intelligibility import Transcriber

                model, language = recogniser(self.config), settings.segment_language
                self.loaded[name] = Transcriber(model, key="segment_asr_model", device=self.device, language=language)


def cut_and_measure(recording, stages: Stages, models: Models) -> tuple[list[Piece], object]:
    from tpu_demo.data.segmenting import measure, read_recording
    from tpu_demo.data.speech_models import RATE

    with timed("read"):
        audio16k, clipped, rate = read_recording(recording.path)
    spans = models.get("vad")(audio16k)
    with timed("measure"):
        pieces = measure(audio16k, clipped, rate, spans)
    value = {"seconds": len(audio16k) / RATE, "pieces": [dataclasses.asdict(piece) for piece in pieces]}
    stages.save("pieces", stages.pieces_key, value)
    return pieces, audio16k


def qualify(recording, pieces: list[Piece], stages: Stages, models: Models, settings, audio16k=None) -> None:
    """DNSMOS scores and voice of the pieces the cheap measures keep (judge), those of earlier runs reused; a
    threshold that keeps more measures only those, reading the recording again."""
    from tpu_demo.data.segmenting import read_recording

    judge(pieces, recording, settings)
    measured = stages.load("quality", stages.quality_key) or {}
    todo = [piece for piece in pieces if not piece.dropped and span(piece) not in measured]
    if todo:
        if audio16k is None:
            with timed("read"):
                audio16k = read_recording(recording.path)[0]
        for piece in todo:
            measured[span(piece)] = quality(audio16k, piece, models.get("dnsmos"), models.get("voice"))
        stages.save("quality", stages.quality_key, measured)
    with_quality(pieces, measured)


def with_quality(pieces: list[Piece], measured: dict) -> None:
    for piece in pieces:
        found = measured.get(span(piece), {})
        piece.dnsmos, piece.voice = found.get("dnsmos", {}), found.get("voice", [])
        piece.voice_windows = found.get("voice_windows", [])


def transcribe(recording, pieces: list[Piece], stages: Stages, models: Models, settings) -> None:
    """Transcripts of the pieces that may be kept and have none yet; those of earlier runs are kept."""
    import soundfile

    from tpu_demo.data.speech_models import levelled, without_dc

    judge(pieces, recording, settings)
    found = stages.load("transcripts", stages.transcripts_key)
    transcripts = found or {}
    todo = [p for p in pieces if needs_transcript(p, recording, settings) and span(p) not in transcripts]
    if not todo:
        if found is None:  # none needed: said, so that no later run loads the recogniser for it
            stages.save("transcripts", stages.transcripts_key, transcripts)
        return
    rate = soundfile.info(str(recording.path)).samplerate
    for piece in todo:
        start, stop = int(piece.start * rate), int(piece.end * rate)
        audio, _ = soundfile.read(str(recording.path), start=start, stop=stop, dtype="float32", always_2d=True)
        heard = levelled(without_dc(audio.mean(axis=1), rate), rate)  # as the other models hear it
        transcripts[span(piece)] = models.get("recogniser")(heard, rate)
    stages.save("transcripts", stages.transcripts_key, transcripts)


def align(recording, pieces: list[Piece], stages: Stages, models: Models) -> None:
    """The recording's own text split over its pieces by aligning it to their audio (align_text); alignments of
    earlier runs reused (a join setting aligns nothing again)."""
    import soundfile

    from tpu_demo.data.speech_models import levelled, without_dc

    aligned = stages.load("alignments", stages.pieces_key) or {}
    info = soundfile.info(str(recording.path))
    before, rate = len(aligned), info.samplerate
    # each piece with the margins its clip would get: a speech detector cuts tight, inside a last consonant
    seconds = info.frames / rate
    spans = {id(piece): with_margins(pieces, number, number, seconds) for number, piece in enumerate(pieces)}

    def align_piece(piece, text):
        start, end = spans[id(piece)]
        found = aligned.get(alignment_key(start, end, text))
        if found is None:
            first, stop = round(start * rate), round(end * rate)
            audio, _ = soundfile.read(str(recording.path), start=first, stop=stop, dtype="float32", always_2d=True)
            heard = levelled(without_dc(audio.mean(axis=1), rate), rate)
            found = aligned[alignment_key(start, end, text)] = models.get("aligner")(heard, rate, normalise(text))
        return found

    align_text(pieces, recording, align_piece)
    if len(aligned) > before:
        stages.save("alignments", stages.pieces_key, aligned)


def span(piece) -> str:
    return f"{piece.start:.3f}-{piece.end:.3f}"


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


def shares(recordings, settings, processes: int) -> list[list]:
    """The recordings split over `processes`, each of which has about the same work to do: the costliest first, each
    to the process with the least (seconds of audio, TRANSCRIBED_COST times for those the recogniser hears); the same
    split in every process, each share in the recordings' order."""
    import soundfile

    def cost(recording) -> float:
        try:
            seconds = soundfile.info(str(recording.path)).duration
        except (RuntimeError, OSError):  # a format soundfile cannot open: its size, as 16 kHz 16-bit audio
            seconds = recording.path.stat().st_size / 32000
        return seconds * (1.0 if aligns(recording, settings) else TRANSCRIBED_COST)

    costs, loads, owners = [cost(recording) for recording in recordings], [0.0] * processes, {}
    for index in sorted(range(len(recordings)), key=lambda index: -costs[index]):
        owners[index] = loads.index(min(loads))
        loads[owners[index]] += costs[index]
    return [[recording for index, recording in enumerate(recordings) if owners[index] == process]
            for process in range(processes)]  # fmt: skip


def segment_share(config, recordings, out: Path, state) -> None:
    """This process's share of the recordings (`shares`): the stages not done yet with these settings."""
    from tqdm.auto import tqdm

    asr_model, settings = recogniser(config), config.recordings
    share = shares(recordings, settings, state.num_processes)[state.process_index]
    device = str(state.device) if state.device.type == "cuda" else "cpu"  # XLA: the host CPU, as for encoding
    models = Models(config, device)
    stages = [Stages(recording, out, settings, asr_model) for recording in share]
    if any(stage.load("transcripts", stage.transcripts_key) is None for stage in stages):
        models.get("recogniser")  # refused before any work, if it is no recogniser
    out.mkdir(parents=True, exist_ok=True)
    bar = tqdm(share, desc="segmenting", unit="recording", disable=not state.is_main_process)
    done = 0
    for recording, stage in zip(bar, stages, strict=True):
        found = stage.pieces()
        pieces, audio16k = cut_and_measure(recording, stage, models) if found is None else (found[0], None)
        done += found is not None
        qualify(recording, pieces, stage, models, settings, audio16k)
        transcribe(recording, pieces, stage, models, settings)
        if aligns(recording, settings):  # in each process: the join, in the main one, finds them done
            align(recording, pieces, stage, models)
    if state.is_main_process and done:
        whose = "this process's " if state.num_processes > 1 else ""
        say(f"{done} of {whose}{len(share)} recording{'s' * (len(share) > 1)} cut and measured before (cached)")


def share_times(out: Path, state) -> None:
    """Every process's stage times, added up in the main one's (the report's seconds_by_stage: all the work, in
    seconds of one core); a file each, as the stages' results are (a gather needs a backend XLA lacks)."""
    times = out / PARTS / f"times.{state.process_index}.json"
    if not state.is_main_process:
        times.parent.mkdir(parents=True, exist_ok=True)
        times.write_text(json.dumps(TIMES))
    state.wait_for_everyone()
    if state.is_main_process:
        for index in range(1, state.num_processes):
            other = times.with_name(f"times.{index}.json")
            TIMES.update(json.loads(other.read_text()))
            other.unlink()


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
    written = {clip["audio"]: clip for clip in clips if clip.get("audio") and not clip.get("dropped")}
    edits = read_edits(metadata, {audio: clip["text"] for audio, clip in written.items()}, allow_removals)
    for audio, clip in written.items():
        key = (clip["recording"], clip["start"], clip["end"])
        if audio in edits.removed:
            corrections[key] = None
        elif audio in edits.texts:
            corrections[key] = edits.texts[audio]
    return corrections, table


def merge(config, recordings, out: Path, unreadable: dict[str, str], allow_removals: bool = False) -> dict:
    """Every recording's pieces judged, joined into clips, written; metadata.csv and the report. The speaker check
    and the pace filter need all recordings; the models are not needed."""
    settings, asr_model, max_text_tokens = config.recordings, recogniser(config), config.data.max_text_tokens
    pieces_of, seconds_of = {}, {}
    for recording in recordings:
        stages = Stages(recording, out, settings, asr_model)
        pieces, seconds_of[recording.name] = stages.pieces()
        with_quality(pieces, stages.load("quality", stages.quality_key) or {})
        transcripts = stages.load("transcripts", stages.transcripts_key) or {}
        judge(pieces, recording, settings)
        for piece in pieces:
            piece.transcript = transcripts.get(span(piece))
        pieces_of[recording.name] = pieces
    for speaker in {recording.speaker or recording.name for recording in recordings}:
        by_recording = [pieces_of[r.name] for r in recordings if (r.speaker or r.name) == speaker]
        drop_other_voices([p for group in by_recording for p in group], settings.min_speaker_similarity, by_recording)
    clips, models = [], Models(config, "cpu")  # the aligner, for pieces no run aligned before
    for recording in recordings:
        if aligns(recording, settings):
            align(recording, pieces_of[recording.name], Stages(recording, out, settings, asr_model), models)
        else:
            give_texts(pieces_of[recording.name], recording, settings.max_asr_cer)
        clips += join(pieces_of[recording.name], recording, seconds_of[recording.name], settings, max_text_tokens)
    drop_unusual_pace(clips, settings.pace_tolerance)
    metadata = out / "metadata.csv"
    corrections, current = read_corrections(out, allow_removals)
    if corrections:
        write_corrections_table(out / CORRECTIONS, corrections)
    applied = apply_corrections(clips, corrections)
    kept = [clip for clip in clips if not clip.dropped]
    with timed("write"):
        write_clips(kept, recordings, out, settings.target_lufs)
    table = metadata_table(kept, settings.segment_language)
    summary = report(clips, len(recordings))
    summary["skipped"] = unreadable
    summary["seconds_by_stage"] = {stage: round(seconds, 2) for stage, seconds in sorted(TIMES.items())}
    summary["corrections"] = {"applied": applied, "unmatched": len(corrections) - applied}
    summary["settings"] = settings_fingerprint(settings, asr_model)
    summary["segment_settings"] = segment_settings(settings, asr_model)  # named in training's refusal
    summary["recordings_digest"] = recordings_digest(settings.recordings)
    summary["metadata_sha256"] = text_digest(table)
    summary["replaces_sha256"] = text_digest(current) if current is not None else None
    (out / REPORT).write_text(json.dumps(summary, indent=1))
    metadata.write_text(table, encoding="utf-8")  # after the report, which tells it from the user's edits
    return summary


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
    path_of = {recording.name: recording.path for recording in recordings}
    for clip in kept:
        write_clip(clip, path_of[clip.recording], out, target_lufs)
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
    speakers = "; ".join(f"{name} {s['clips']} ({s['seconds']:.1f} s)" for name, s in summary["speakers"].items())
    lines = [
        f"{summary['recordings']} recordings, {total:.1f} s of speech cut into clips: kept {kept['clips']} clips "
        f"({kept['seconds']:.1f} s)",
        f"dropped: {dropped or 'none'}",
        f"kept per speaker: {speakers or 'none'}",
    ]
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
    return [*lines, f"dataset: {out / 'metadata.csv'}; every clip and why it was dropped: {out / REPORT}"]


def sized_for_training(config, state):
    """The settings with clips no longer than training keeps whole (`max_audio_frames` of the same YAML), told."""
    if not config.recordings.recordings:
        raise FineTuneError("recordings: not set: name the folder of long recordings to cut into clips")
    asked = config.recordings.max_clip_seconds
    config = dataclasses.replace(config, recordings=clip_settings(config))
    if config.recordings.max_clip_seconds < asked and state.is_main_process:
        rate, codec = codec_frame_rate(config.data.codec)
        say(
            f"clips of at most {config.recordings.max_clip_seconds} s, what max_audio_frames "
            f"{config.data.max_audio_frames} holds at {rate:.2f} frames a second ({codec}); max_clip_seconds is "
            f"{asked}"
        )
    seconds, tokens = config.recordings.max_clip_seconds, config.data.max_text_tokens
    if tokens < seconds * SPOKEN_TOKENS_PER_SECOND and state.is_main_process:
        say(
            f"max_text_tokens {tokens} holds about {tokens / SPOKEN_TOKENS_PER_SECOND:.1f} s of speech "
            f"({SPOKEN_TOKENS_PER_SECOND} Dia tokens a second), clips are up to {seconds} s: clips are joined only "
            f"while their text fits, a piece whose text alone is longer is dropped; max_text_tokens: "
            f"{text_tokens_for(seconds)} fits {seconds} s clips"
        )
    return config


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    from tpu_demo.config.checks import check_config, settings
    from tpu_demo.config.load import load_raw

    parser = config_parser("tpu_demo.segment", __doc__.splitlines()[0])
    removals = "remove the clips of more rows deleted from metadata.csv than a few (3, or a tenth of them)"
    parser.add_argument(ALLOW_REMOVALS, dest="allow_removals", action="store_true", help=removals)
    args = parser.parse_args(argv)
    try:
        raw = load_raw(args.config, args.overrides)
        check_config(raw)
        config = settings(raw)  # no TrainingArguments: segmenting trains nothing
        state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))
        config = sized_for_training(config, state)
        recogniser(config)
        out = output_folder(config)
        read_corrections(out, args.allow_removals)  # a table the user saved that cannot be read: before any work
        recordings, unreadable = find_recordings(config.recordings.recordings, config.recordings.skip_recordings)
        if state.is_main_process:
            for name, problem in unreadable.items():
                say(f"recordings: {name}: {problem}: skipped; to leave it out for good, add it to skip_recordings")
            if state.num_processes > 1:  # `accelerate launch --num_processes 2` alone starts one on a CPU host
                say(f"{len(recordings)} recordings shared by {state.num_processes} processes")
        if any(recording.text for recording in recordings):
            import jiwer  # noqa: F401 (aligning a recording's text compares transcripts)
        TIMES.clear()  # this run's, not those of an earlier run in this process (a notebook's)
        segment_share(config, recordings, out, state)
        share_times(out, state)
        if state.is_main_process:
            for line in report_lines(merge(config, recordings, out, unreadable, args.allow_removals), out):
                say(line)
    except ImportError as error:
        name = missing_package(error)
        fail(f"recordings: {name} is not installed (pip install '{name}', or the fine-tuner's `speech` extra)")
    except KeyboardInterrupt:  # each stage finished is saved: a rerun does the rest; Ctrl-C reaches every process
        if os.environ.get("RANK", "0") == "0":
            say("interrupted; the recordings done are kept: run the same command again to continue", file=sys.stderr)
        sys.exit(130)  # a shell's code for Ctrl-C
    except FineTuneError as error:
        fail(error)
    state.wait_for_everyone()
    state.destroy_process_group()  # before the interpreter exits (see tpu_demo.prepare)
    return 0


if __name__ == "__main__":
    sys.exit(main())
