"""Segmenting at many times real time: DNSMOS once per 9 s of a piece (speechmos's `run` slid 9 s windows by 1 s
over a piece doubled past 9 s, and ran the P.808 model besides), DNSMOS and the voice only for the pieces the cheap
measures keep, and the time of each stage in the report (benchmarks/segment_faults.py prints it per audio hour)."""

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


@pytest.mark.xdist_group("segment")
def test_a_reverberant_sentence_among_clean_ones_is_dropped_by_its_own_dnsmos(tmp_path):
    # heard in one 9 s window with its clean neighbour it scored BAK 2.08 and passed; alone 1.18
    needs_speech_models()
    raw = tmp_path / "recordings"
    raw.mkdir()
    texts = planted_faults.SENTENCES[:6]
    clean, said = planted_faults.talk(texts, "en-us+m7", 16000, seed=0)
    soundfile.write(raw / "hall.wav", planted_faults.reverberate_sentence(clean, said[2], 16000), 16000)
    (raw / "hall.txt").write_text("[S1] " + " ".join(texts))
    clips = segmented(raw, tmp_path / "out")["clips"]
    over = [clip for clip in clips if clip["start"] < said[2].end - 0.3 and clip["end"] > said[2].start + 0.3]
    assert over and all(clip["dropped"] == "noisy" and "DNSMOS BAK" in clip["detail"] for clip in over), over
    assert any(not clip["dropped"] for clip in clips)
