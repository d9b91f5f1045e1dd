"""The stages over one process's share of the recordings (each cached: an interrupted run continues), then, in the
main process, the join and write for all of them at once (the voice and pace filters need every recording).
"""

import dataclasses
import json
from pathlib import Path

from tpu_demo.cli import say
from tpu_demo.data.metadata import write_corrections_table
from tpu_demo.segmenting.align import align_text, alignment_key, aligns, give_texts
from tpu_demo.segmenting.diarize import diarize, turns_of, voices_of
from tpu_demo.segmenting.join import join, with_margins
from tpu_demo.segmenting.judge import VOICE_SECONDS, drop_other_voices, drop_unusual_pace, judge, needs_transcript
from tpu_demo.segmenting.measure import Piece, combined, measure, quality, step_voices, voice_of
from tpu_demo.segmenting.page import write_page
from tpu_demo.segmenting.read import (
    RATE,
    channel_name,
    heard,
    levelled,
    read_recording,
    recordings_digest,
    speech_channel,
    without_dc,
)
from tpu_demo.segmenting.settings import PARTS, recogniser, segment_settings, settings_fingerprint
from tpu_demo.segmenting.stages import TIMES, Models, Stages, span, timed
from tpu_demo.segmenting.turns import cut_at_turns, turn_cuts
from tpu_demo.segmenting.write import (
    CORRECTIONS,
    REPORT,
    apply_corrections,
    for_review,
    metadata_table,
    read_corrections,
    summarise,
    text_digest,
    write_clips,
    write_review,
)

TRANSCRIBED_COST = 5.0  # a recording's work if the recogniser hears it, over its work if its text is aligned
JOINED_PAUSE = 1.0  # seconds: a pause a reader makes inside a sentence (a breath)


def cut_and_measure(recording, stages: Stages, models: Models) -> tuple[list[Piece], object]:
    with timed("read"):
        recording.channel = speech_channel(recording.audio)
        audio16k, marks, rate = read_recording(recording.audio, recording.channel)
    spans = models.get("vad")(audio16k)
    with timed("measure"):
        pieces = measure(audio16k, marks, rate, spans)
    value = {"seconds": len(audio16k) / RATE, "pieces": [dataclasses.asdict(piece) for piece in pieces],
             "channel": recording.channel}  # fmt: skip
    stages.save("pieces", stages.pieces_key, value)
    return pieces, audio16k


def heard_at_16k(recording, audio16k=None):
    """The recording as the models hear it (16 kHz, its speech channel): `audio16k` where a stage read it already."""
    if audio16k is None:
        with timed("read"):
            audio16k = read_recording(recording.audio, recording.channel)[0]
    return audio16k


def qualify(recording, pieces: list[Piece], stages: Stages, models: Models, settings, audio16k=None) -> None:
    """DNSMOS scores and voice of the pieces the cheap measures keep (judge), those of earlier runs reused; a
    threshold that keeps more measures only those, reading the recording again. A piece whose level steps has its
    voice measured first: a step where the voice changes is a change of speaker, no fault (judge)."""
    measured = stages.load("quality", stages.quality_key) or {}
    steps = [piece for piece in pieces if piece.fault == "level step" and span(piece) not in measured]
    if steps:
        audio16k = heard_at_16k(recording, audio16k)
        for piece in steps:
            measured[span(piece)] = step_voices(audio16k, piece, models.get("voice"))
        with_quality(pieces, measured)
    judge(pieces, recording, settings)
    todo = [piece for piece in pieces if not piece.dropped and "dnsmos" not in measured.get(span(piece), {})]
    # without a text, the voices of the pieces dropped before too: the first voice heard is [S1] (diarize)
    heard_only = [piece for piece in pieces if piece.dropped and span(piece) not in measured and recording.text is None
                  and piece.end - piece.start >= VOICE_SECONDS]  # fmt: skip
    if todo or heard_only or steps:
        audio16k = heard_at_16k(recording, audio16k)
        for piece in todo:
            found = quality(audio16k, piece, models.get("dnsmos"), models.get("voice"))
            measured[span(piece)] = measured.get(span(piece), {}) | found  # a level step's voices kept
        for piece in heard_only:
            measured[span(piece)] = voice_of(audio16k, piece, models.get("voice"))
        stages.save("quality", stages.quality_key, measured)
    with_quality(pieces, measured)


def turns_of_recording(recording, pieces: list[Piece], stages: Stages, models: Models, audio16k=None) -> dict:
    """Where the recording's pieces are cut at a change of voice (turns.turn_cuts), as found before if it was."""
    cuts = stages.load("turns", stages.turns_key)
    if cuts is None:
        audio16k = heard_at_16k(recording, audio16k)
        models.get("voice")  # loaded; its calls here are the turns stage's time, not counted twice
        with timed("turns"):
            cuts = turn_cuts(pieces, audio16k, models.loaded["voice"])
        stages.save("turns", stages.turns_key, cuts)
    return cuts


def with_quality(pieces: list[Piece], measured: dict) -> None:
    for piece in pieces:
        found = measured.get(span(piece), {})
        piece.dnsmos, piece.voice = found.get("dnsmos", {}), found.get("voice", [])
        piece.voice_windows = found.get("voice_windows", [])
        piece.fault_voices = found.get("fault_voices", [])


def transcribe(recording, pieces: list[Piece], stages: Stages, models: Models, settings) -> None:
    """Transcripts of the pieces that may be kept and have none yet; those of earlier runs are kept."""
    import soundfile

    judge(pieces, recording, settings)
    found = stages.load("transcripts", stages.transcripts_key)
    transcripts = found or {}
    todo = [p for p in pieces if needs_transcript(p, recording, settings) and span(p) not in transcripts]
    if not todo:
        if found is None:  # none needed: said, so that no later run loads the recogniser for it
            stages.save("transcripts", stages.transcripts_key, transcripts)
        return
    rate = soundfile.info(str(recording.audio)).samplerate
    for piece in todo:
        start, stop = int(piece.start * rate), int(piece.end * rate)
        audio, _ = soundfile.read(str(recording.audio), start=start, stop=stop, dtype="float32", always_2d=True)
        samples = levelled(without_dc(heard(audio, recording.channel), rate), rate)  # as the other models hear it
        transcripts[span(piece)] = models.get("recogniser")(samples, rate)  # its words and confidence
    stages.save("transcripts", stages.transcripts_key, transcripts)


def align_recording(recording, pieces: list[Piece], stages: Stages, models: Models) -> None:
    """The recording's own text split over its pieces by aligning it to their audio (align_text); alignments of
    earlier runs reused (a join setting aligns nothing again)."""
    import soundfile

    aligned = stages.load("alignments", stages.pieces_key) or {}
    info = soundfile.info(str(recording.audio))
    before, rate = len(aligned), info.samplerate
    seconds, spans = info.frames / rate, {}

    def align_piece(piece, text):
        start, end = spans[id(piece)]
        found = aligned.get(alignment_key(start, end, text))
        if found is None:
            first, stop = round(start * rate), round(end * rate)
            audio, _ = soundfile.read(str(recording.audio), start=first, stop=stop, dtype="float32", always_2d=True)
            samples = levelled(without_dc(heard(audio, recording.channel), rate), rate)
            found = aligned[alignment_key(start, end, text)] = models.get("aligner")(samples, rate, text)
        return found

    for attempt in range(2):
        # each piece with the margins its clip would get: a speech detector cuts tight, inside a last consonant
        spans.update({id(piece): with_margins(pieces, number, number, seconds, stages.longest)
                      for number, piece in enumerate(pieces)})  # fmt: skip
        align_text(pieces, recording, align_piece)
        joined = with_unaligned_joined(pieces, stages.longest) if not attempt else None
        if joined is None:
            break
        for piece in joined:  # the text's search again, the joined pieces in their place
            piece.text, piece.alignment = "", None
            if piece.dropped == "uncertain alignment":
                piece.dropped, piece.detail = None, ""
        pieces[:] = joined
    if len(aligned) > before:
        stages.save("alignments", stages.pieces_key, aligned)


def unaligned(piece: Piece) -> bool:
    return piece.dropped == "uncertain alignment" and not piece.text


def with_unaligned_joined(pieces: list[Piece], longest: float) -> list[Piece] | None:
    """The pieces, each run of those no part of the text aligned to, apart by up to JOINED_PAUSE, as one piece
    (`combined`) while it fits a clip: a reader's pause where the text has no punctuation ("... from shelf F | to
    the workbench ...") parts a sentence whose halves no part fits, the text's units ending at punctuation. None
    where there is no such run. Not across a sound in a pause (a cough, a click), where no clip joins."""
    joined = []
    for piece in pieces:
        last = joined[-1] if joined else None
        if (
            last is not None
            and unaligned(last)
            and unaligned(piece)
            and not piece.sound_before
            and piece.start - last.end <= JOINED_PAUSE
            and piece.end - last.start <= longest
        ):
            joined[-1] = combined(last, piece)
        else:
            joined.append(piece)
    return joined if len(joined) < len(pieces) else None


def shares(recordings, settings, processes: int) -> list[list]:
    """The recordings split over `processes`, each of which has about the same work to do: the costliest first, each
    to the process with the least (seconds of audio, TRANSCRIBED_COST times for those the recogniser hears); the same
    split in every process, each share in the recordings' order."""
    import soundfile

    def cost(recording) -> float:
        try:
            seconds = soundfile.info(str(recording.audio)).duration
        except (RuntimeError, OSError):  # a format soundfile cannot open: its size, as 16 kHz 16-bit audio
            seconds = recording.audio.stat().st_size / 32000
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
    # refused before any work in every process, if it is no recogniser; not loaded where every text is aligned
    needed = any(not aligns(recording, settings) for recording in recordings)
    if asr_model and needed and any(stage.load("transcripts", stage.transcripts_key) is None for stage in stages):
        models.get("recogniser")
    out.mkdir(parents=True, exist_ok=True)
    bar = tqdm(share, desc="segmenting", unit="recording", disable=not state.is_main_process)
    done = 0
    for recording, stage in zip(bar, stages, strict=True):
        found = stage.pieces(recording)
        pieces, audio16k = cut_and_measure(recording, stage, models) if found is None else (found[0], None)
        done += found is not None
        qualify(recording, pieces, stage, models, settings, audio16k)
        if recording.text is None:  # a dialogue's turns without a pause: its pieces cut there, the parts measured
            pieces = cut_at_turns(pieces, turns_of_recording(recording, pieces, stage, models, audio16k))
            qualify(recording, pieces, stage, models, settings)
        transcribe(recording, pieces, stage, models, settings)
        if aligns(recording, settings):  # in each process: the join, in the main one, finds them done
            align_recording(recording, pieces, stage, models)
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


def merge(config, recordings, out: Path, unreadable: dict[str, str], allow_removals: bool = False) -> dict:
    """Every recording's pieces judged, joined into clips, written; metadata.csv and the report. The speaker check
    and the pace filter need all recordings; the models are not needed."""
    settings, asr_model, max_text_tokens = config.recordings, recogniser(config), config.data.max_text_tokens
    pieces_of, seconds_of, uncut = {}, {}, {}
    for recording in recordings:
        stages = Stages(recording, out, settings, asr_model)
        pieces, seconds_of[recording.name] = stages.pieces(recording)
        measured = stages.load("quality", stages.quality_key) or {}
        if recording.text is None:  # the voices are told from the pieces as cut, before they were cut at turns
            with_quality(pieces, measured)
            judge(pieces, recording, settings)
            uncut[recording.name] = pieces
            pieces = cut_at_turns(pieces, stages.load("turns", stages.turns_key) or {})
        with_quality(pieces, measured)
        transcripts = stages.load("transcripts", stages.transcripts_key) or {}
        judge(pieces, recording, settings)
        for piece in pieces:
            piece.transcript, piece.asr_confidence = transcripts.get(span(piece), (None, None))
        pieces_of[recording.name] = pieces
    models, voices, dialogues = Models(config, "cpu"), {}, set()  # the aligner, for pieces no run aligned before
    for recording in recordings:  # the turns of a dialogue: its text's (aligned first), else its voices'
        pieces = pieces_of[recording.name]
        if aligns(recording, settings):
            align_recording(recording, pieces, Stages(recording, out, settings, asr_model), models)
        if recording.text is None:
            voices[recording.name] = diarize(pieces, uncut[recording.name])
        else:
            voices[recording.name] = len(voices_of(pieces)) or 1
        if not aligns(recording, settings):  # a transcript's text, tagged by its voice; another language's own
            give_texts(pieces, recording, settings.max_asr_cer)
        if (voices[recording.name] > 1 and recording.text is None) or "[S2]" in (recording.text or ""):
            dialogues.add(recording.name)
    for speaker in {recording.speaker or recording.name for recording in recordings}:  # one voice: its speaker's
        by_recording = [pieces_of[r.name] for r in recordings
                        if (r.speaker or r.name) == speaker and r.name not in dialogues]  # fmt: skip
        drop_other_voices([p for group in by_recording for p in group], settings.min_speaker_similarity, by_recording)
    for name in dialogues:  # each voice of a dialogue by itself
        for turn in turns_of(pieces_of[name]):
            drop_other_voices(turn, settings.min_speaker_similarity)
    clips = []
    for recording in recordings:
        clips += join(pieces_of[recording.name], recording, seconds_of[recording.name], settings, max_text_tokens)
    drop_unusual_pace(clips, settings.pace_tolerance, settings.segment_language)
    metadata = out / "metadata.csv"
    corrections, current = read_corrections(out, allow_removals)
    if corrections:
        write_corrections_table(out / CORRECTIONS, corrections)
    applied = apply_corrections(clips, corrections)
    kept = [clip for clip in clips if not clip.dropped]
    review = for_review(kept, settings)
    with timed("write"):
        write_clips(kept, recordings, out, settings.target_lufs)  # those to review too: to listen to
    write_review(review, out, settings.segment_language)
    table = metadata_table([clip for clip in kept if not clip.review], settings.segment_language)
    summary = summarise(clips, len(recordings))
    summary["voices"] = voices
    summary["channels"] = {
        recording.name: channel_name(recording) for recording in recordings if recording.channel is not None
    }
    summary["skipped"] = unreadable
    summary["seconds_by_stage"] = {stage: round(seconds, 2) for stage, seconds in sorted(TIMES.items())}
    summary["corrections"] = {"applied": applied, "unmatched": len(corrections) - applied}
    summary["settings"] = settings_fingerprint(settings, asr_model)
    summary["segment_settings"] = segment_settings(settings, asr_model)  # named in training's refusal
    summary["recordings_digest"] = recordings_digest(settings.recordings)
    summary["metadata_sha256"] = text_digest(table)
    summary["replaces_sha256"] = text_digest(current) if current is not None else None
    (out / REPORT).write_text(json.dumps(summary, indent=1))
    write_page(summary, out, {recording.name: recording.audio for recording in recordings})
    metadata.write_text(table, encoding="utf-8")  # after the report, which tells it from the user's edits
    return summary
