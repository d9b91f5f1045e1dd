"""Segmenting at many times real time: DNSMOS once per 9 s (speechmos's `run` slid 9 s windows by 1 s over a piece
doubled past 9 s, and ran the P.808 model besides), of neighbouring pieces together, a piece of a window below a
threshold scored alone; DNSMOS and the voice only for the pieces the cheap measures keep; Silero's sequence model;
and the time of each stage in the report (benchmarks/segment_faults.py prints it per audio hour)."""

import numpy as np
import pytest

from tests import planted_faults
from tests.finetune.test_segmenting import needs_speech_models, segmented
from tests.testing_utils import require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia


def test_dnsmos_runs_once_per_nine_seconds_and_scores_as_speechmos_does():
    needs_speech_models()
    from speechmos import dnsmos

    from tpu_demo.data.speech_models import QualityJudge

    judge = QualityJudge()
    runs, run = [], judge.session.run
    judge.session.run = lambda *args: runs.append(args[1]["input_1"].shape) or run(*args)
    sentence = planted_faults.speak(planted_faults.SENTENCES[0], planted_faults.VOICES["alice"], 16000)
    scores = judge(sentence)
    theirs = dnsmos.run(sentence, 16000)
    assert runs == [(1, 144160)]  # one window of 9.01 s
    for name in ("sig", "bak", "ovrl"):
        assert scores[name] == pytest.approx(float(theirs[f"{name}_mos"]), abs=0.2)
    runs.clear()
    judge(np.tile(sentence, 6)[: 20 * 16000])
    assert len(runs) == 3  # 20 s: the fewest 9.01 s windows that cover it


def test_dnsmos_takes_the_threads_of_the_process_share_of_the_cores():
    needs_speech_models()
    import torch

    from tpu_demo.data.speech_models import QualityJudge

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # as `accelerate launch` gives each of two processes on two cores
        options = QualityJudge().session.get_session_options()
    finally:
        torch.set_num_threads(threads)
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)


def test_the_speech_detector_finds_silero_streaming_spans_in_a_call_per_16_seconds():
    needs_speech_models()
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    from tpu_demo.data.speech_models import SpeechDetector

    audio, _ = planted_faults.talk(planted_faults.SENTENCES[:6], planted_faults.VOICES["alice"], 16000, seed=3)
    detector = SpeechDetector(threshold=0.5, min_pause_seconds=0.3, max_seconds=6.0)
    calls, run = [], detector.model.session.run
    detector.model.session.run = lambda *args: calls.append(1) or run(*args)
    spans = detector(audio)
    streamed = get_speech_timestamps(
        torch.from_numpy(audio), load_silero_vad(onnx=False), threshold=0.5, sampling_rate=16000,
        min_silence_duration_ms=300, max_speech_duration_s=6.0, speech_pad_ms=0,
    )  # fmt: skip
    assert len(spans) >= 6 and spans == [(span["start"] / 16000, span["end"] / 16000) for span in streamed]
    assert len(calls) == int(np.ceil(len(audio) / 16000 / 16.384))  # 512 frames of 32 ms a call


@pytest.mark.xdist_group("segment")
def test_the_costly_measures_are_taken_of_the_pieces_the_cheap_ones_keep(tmp_path):
    needs_speech_models()
    raw = tmp_path / "recordings"
    (raw / "alice").mkdir(parents=True)
    clean, said = planted_faults.talk(planted_faults.SENTENCES[:3], planted_faults.VOICES["alice"], 16000, seed=1)
    soundfile.write(raw / "alice/clean.wav", clean, 16000)
    noisy, said = planted_faults.talk(planted_faults.SENTENCES[3:6], planted_faults.VOICES["alice"], 16000, seed=2)
    soundfile.write(raw / "alice/noisy.wav", planted_faults.add_noise(noisy, said, 16000, 8.0), 16000)
    out = tmp_path / "out"
    report = segmented(raw, out)
    noisy = [clip for clip in report["clips"] if clip["recording"] == "alice/noisy"]
    assert noisy and all(clip["dropped"] == "noisy" and clip["dnsmos"] == {} for clip in noisy)  # by SNR alone
    kept = [clip for clip in report["clips"] if not clip["dropped"]]
    assert kept and all(set(clip["dnsmos"]) == {"sig", "bak", "ovrl"} for clip in kept)
    assert {"read", "vad", "measure", "dnsmos", "voice", "recogniser", "write"} <= set(report["seconds_by_stage"])


class ScoredByLength:
    """DNSMOS stand-in: the scores `scores(seconds)` gives the length of what it hears, and the lengths it heard."""

    def __init__(self, scores):
        self.scores, self.heard = scores, []

    def __call__(self, audio16k):
        self.heard.append(round(len(audio16k) / 16000, 2))
        return self.scores(len(audio16k) / 16000)


class FakeModels:
    def __init__(self, judge):
        self.models = {"dnsmos": judge, "voice": lambda audio16k: [1.0]}

    def get(self, name):
        return self.models[name]


def qualified(tmp_path, judge, min_dnsmos_bak=3.0):
    """Four 3 s pieces of one recording through segment.qualify with `judge` for DNSMOS; the pieces, as judged."""
    from types import SimpleNamespace

    from tpu_demo.data.segmenting import Piece, Recording
    from tpu_demo.data.segmenting import judge as judged
    from tpu_demo.segment import Stages, qualify

    path = tmp_path / "take.wav"
    if not path.exists():
        soundfile.write(path, np.random.default_rng(0).normal(0, 0.1, 14 * 16000).astype(np.float32), 16000)
    recording = Recording(path, "take", None, None)
    settings = SimpleNamespace(vad_threshold=0.5, min_pause_seconds=0.3, max_clip_seconds=15.0, segment_language=None,
                               min_clip_seconds=1.0, max_clipped_share=0.01, min_snr_db=20.0,
                               min_dnsmos_bak=min_dnsmos_bak, min_dnsmos_ovrl=2.5)  # fmt: skip
    pieces = [Piece(0.5 + 3.3 * index, 3.5 + 3.3 * index, snr_db=40.0) for index in range(4)]
    qualify(recording, pieces, Stages(recording, tmp_path / "out", settings, "none"), FakeModels(judge), settings)
    judged(pieces, recording, settings)
    return pieces


def test_dnsmos_scores_neighbouring_pieces_together_up_to_one_window():
    from tpu_demo.data.segmenting import Piece, quality

    judge = ScoredByLength(lambda seconds: {"sig": 4.0, "bak": 4.0, "ovrl": 3.5})
    pieces = [Piece(3.0 * index, 3.0 * index + 3.0) for index in range(4)] + [Piece(12.0, 22.0), Piece(22.0, 24.0)]
    measured = quality(np.zeros(24 * 16000, np.float32), pieces, judge, lambda audio16k: [1.0])
    assert judge.heard == [9.0, 3.0, 10.0, 2.0]  # three 3 s pieces in 9.01 s; a longer piece alone
    assert [measured[f"{p.start:.3f}-{p.end:.3f}"]["shared"] for p in pieces] == [3, 3, 3, 1, 1, 1]


def test_a_piece_of_a_window_below_a_threshold_is_judged_by_its_own_scores(tmp_path):
    # the window of three scores 2.0 (as if one of them were noisy), each piece alone 4.0: all four kept
    judge = ScoredByLength(lambda seconds: {"sig": 4.0, "bak": 2.0 if seconds > 3.5 else 4.0, "ovrl": 3.5})
    pieces = qualified(tmp_path, judge)
    assert judge.heard == [9.0, 3.0, 3.0, 3.0, 3.0]
    assert [piece.dropped for piece in pieces] == [None] * 4 and all(p.dnsmos["bak"] == 4.0 for p in pieces)


def test_a_stricter_threshold_on_a_rerun_scores_the_shared_windows_pieces_alone(tmp_path):
    judge = ScoredByLength(lambda seconds: {"sig": 4.0, "bak": 3.2 if seconds > 3.5 else 3.6, "ovrl": 3.5})
    assert [piece.dropped for piece in qualified(tmp_path, judge)] == [None] * 4
    judge.heard.clear()
    pieces = qualified(tmp_path, judge, min_dnsmos_bak=3.4)  # the window's 3.2 would drop all three
    assert judge.heard == [3.0, 3.0, 3.0]
    assert [piece.dropped for piece in pieces] == [None] * 4
    judge.heard.clear()
    assert [piece.dropped for piece in qualified(tmp_path, judge, min_dnsmos_bak=3.4)] == [None] * 4
    assert judge.heard == []  # their own scores, kept
