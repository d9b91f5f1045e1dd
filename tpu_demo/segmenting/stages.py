"""Each recording's stage results, cached under DATASET/.segmenting/ by the settings and inputs they were made from,
and the models, loaded the first time a stage needs one; the seconds each stage took.
"""

import collections
import contextlib
import hashlib
import json
import os
import time
from pathlib import Path

from tpu_demo.segmenting.measure import Piece
from tpu_demo.segmenting.settings import recogniser, recording_folder

STAGES = 11  # the version of what the stages store: a change here redoes them all
TURNS = 7  # the version of where a dialogue's pieces are cut at a change of voice (turns.py)
TRANSCRIPTS = 2  # the version of what the transcribe stage stores: each piece's words and the recogniser's confidence
MEASURES = 2  # the version of the costly measures (DNSMOS at a piece's own length, the voice with its windows)
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
        self.folder = recording_folder(out, recording.name)
        self.longest = settings.max_clip_seconds  # a clip's length, margins included (join.with_margins)
        stat = recording.path.stat()
        cut = (settings.vad_threshold, settings.min_pause_seconds, settings.max_clip_seconds)
        self.pieces_key = key(STAGES, "pieces", stat.st_size, stat.st_mtime_ns, *cut)
        self.transcripts_key = key(self.pieces_key, asr_model, settings.segment_language, TRANSCRIPTS)
        self.quality_key = key(self.pieces_key, MEASURES)
        self.turns_key = key(self.quality_key, TURNS)

    def load(self, stage: str, stage_key: str):
        path = self.folder / f"{stage}.json"
        found = json.loads(path.read_text()) if path.is_file() else {}
        return found.get("value") if found.get("key") == stage_key else None

    def save(self, stage: str, stage_key: str, value) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        partial = self.folder / f"{stage}.{os.getpid()}.tmp"
        partial.write_text(json.dumps({"key": stage_key, "value": value}))
        partial.replace(self.folder / f"{stage}.json")  # whole or absent: an interrupted stage is done again

    def pieces(self, recording) -> tuple[list[Piece], float] | None:
        """The recording's pieces and seconds, as cut before; the recording told the channel they were cut from."""
        found = self.load("pieces", self.pieces_key)
        if not found:
            return None
        recording.channel = found["channel"]
        return [Piece(**piece) for piece in found["pieces"]], found["seconds"]


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
            from tpu_demo.segmenting import align, cut, measure, transcribe

            settings = self.config.recordings
            if name == "vad":
                threshold, pause = settings.vad_threshold, settings.min_pause_seconds
                self.loaded[name] = cut.SpeechDetector(threshold, pause, settings.max_clip_seconds)
            elif name == "dnsmos":
                self.loaded[name] = measure.QualityJudge()
            elif name == "voice":
                self.loaded[name] = measure.VoiceEncoder()
            elif name == "aligner":
                self.loaded[name] = align.Aligner(max(align.ALIGN_SILENCE, settings.min_pause_seconds + 0.15))
            elif recogniser(self.config) == "pocketsphinx":
                self.loaded[name] = transcribe.Pocketsphinx(settings.segment_language).heard
            else:
                from tpu_demo.evaluation.intelligibility import Transcriber

                model, language = recogniser(self.config), settings.segment_language
                transcriber = Transcriber(model, key="segment_asr_model", device=self.device, language=language)
                self.loaded[name] = transcriber.heard  # a piece's words and the recogniser's confidence in them


def span(piece) -> str:
    return f"{piece.start:.3f}-{piece.end:.3f}"
