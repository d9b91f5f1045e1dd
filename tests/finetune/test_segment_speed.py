"""Segmenting at many times real time: DNSMOS once per piece at its own length (speechmos's `run` repeated a piece
to 9.01 s, slid 9 s windows by 1 s over it, and ran the P.808 model besides), DNSMOS and the voice only for the
pieces the cheap measures keep, and the time of each stage in the report (benchmarks/segment_faults.py prints it
per audio hour)."""

import json

import numpy as np
import pytest

from tests import planted_faults
from tests.finetune.test_segmenting import needs_speech_models, segmented
from tests.testing_utils import require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia


def test_dnsmos_runs_once_per_piece_at_its_own_length_and_scores_as_speechmos_does():
    needs_speech_models()
    from speechmos import dnsmos

    from tpu_demo.segmenting.measure import QualityJudge

    judge = QualityJudge()
    runs, run = [], judge.session.run
    judge.session.run = lambda *args: runs.append(args[1]["input_1"].shape) or run(*args)
    sentence = planted_faults.speak(planted_faults.SENTENCES[0], planted_faults.VOICES["alice"], 16000)
    scores = judge(sentence)
    theirs = dnsmos.run(sentence, 16000)
    assert runs == [(1, len(sentence) // 160 * 160)]  # its own whole 10 ms hops, not repeated to 9.01 s
    for name in ("sig", "bak", "ovrl"):
        assert scores[name] == pytest.approx(float(theirs[f"{name}_mos"]), abs=0.2)
    runs.clear()
    judge(np.tile(sentence, 6)[: 20 * 16000])
    judge(sentence[:8000])
    assert runs == [(1, 20 * 16000), (1, 16000)]  # 20 s in one run; half a second repeated to one


def test_a_dnsmos_graph_other_than_the_one_the_segmenter_knows_is_refused(tmp_path):
    needs_speech_models()
    onnx = pytest.importorskip("onnx")
    import speechmos
    from onnx import numpy_helper

    from tpu_demo.errors import FineTuneError
    from tpu_demo.segmenting.measure import any_length

    model = onnx.load(f"{speechmos.__path__[0]}/dnsmos_models/sig_bak_ovr.onnx")
    framing = next(init for init in model.graph.initializer if init.name == "shape_tensor")
    framing.CopyFrom(numpy_helper.from_array(np.array([-1, 450, 320], dtype=np.int64), "shape_tensor"))
    onnx.save(model, tmp_path / "other.onnx")
    with pytest.raises(FineTuneError, match="not the DNSMOS graph of speechmos 0.0.1"):
        any_length(tmp_path / "other.onnx")


def test_dnsmos_takes_the_threads_of_the_process_share_of_the_cores():
    needs_speech_models()
    import torch

    from tpu_demo.segmenting.measure import QualityJudge

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)  # as `accelerate launch` gives each of two processes on two cores
        options = QualityJudge().session.get_session_options()
    finally:
        torch.set_num_threads(threads)
    assert (options.intra_op_num_threads, options.inter_op_num_threads) == (1, 1)


def test_one_recogniser_and_one_aligner_serve_every_piece_as_new_ones_would():
    # a decoder a piece cost 0.4 s of loading a language model, the aligner's most of its time; a reused decoder
    # adapts its features to what it heard, so it must be reset to give each piece what a new one gives
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner
    from tpu_demo.segmenting.transcribe import Pocketsphinx

    recogniser, aligner = Pocketsphinx(), Aligner(0.4)
    for voice in ("en+m3", "en-us+f4"):  # a decoder not reset gave the third piece other words
        for sentence in planted_faults.SENTENCES[:3]:
            audio = planted_faults.speak(sentence, voice, 16000)
            words = sentence.lower().strip(".").replace(",", "").split()
            assert recogniser(audio, 16000) == Pocketsphinx()(audio, 16000), (voice, sentence)
            for text in (" ".join(words), " ".join(words[1:])):
                assert aligner(audio, 16000, text) == Aligner(0.4)(audio, 16000, text), (voice, text)


def test_a_piece_the_decoder_fails_on_leaves_it_serving_the_next():
    # pocketsphinx raises on no samples after starting an utterance: the reused decoder then refused every piece after
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner
    from tpu_demo.segmenting.transcribe import Pocketsphinx

    recogniser, aligner = Pocketsphinx(), Aligner(0.4)
    audio = planted_faults.speak(planted_faults.SENTENCES[0], "en+f3", 16000)
    text = planted_faults.SENTENCES[0].lower().strip(".")
    for failing in (
        lambda: recogniser(np.zeros(0, np.float32), 16000),
        lambda: aligner(np.zeros(0, np.float32), 16000, text),
    ):
        with pytest.raises(IndexError):
            failing()
    assert recogniser(audio, 16000) == Pocketsphinx()(audio, 16000)
    assert aligner(audio, 16000, text) == Aligner(0.4)(audio, 16000, text)


def test_the_speech_detector_finds_silero_streaming_spans_in_a_call_per_16_seconds():
    needs_speech_models()
    import torch
    from silero_vad import get_speech_timestamps, load_silero_vad

    from tpu_demo.segmenting.cut import SpeechDetector

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
    assert "dnsmos" not in segmented(raw, out)["seconds_by_stage"]  # a rerun keeps each piece's measures
    for part in (out / ".segmenting").glob("*/quality.json"):  # as the measures of an earlier version stored them
        stored = json.loads(part.read_text())
        stored["key"] = json.loads((part.parent / "pieces.json").read_text())["key"]
        part.write_text(json.dumps(stored))
    again = segmented(raw, out)
    assert "dnsmos" in again["seconds_by_stage"]
    assert [clip["dnsmos"] for clip in again["clips"]] == [clip["dnsmos"] for clip in report["clips"]]


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


@pytest.mark.xdist_group("segment")
def test_the_long_script_benchmark_prints_its_wrong_texts_and_stages(capsys):
    needs_speech_models()
    from benchmarks.segment_long_script import main

    assert main(["--sentences", "8", "--voices", "en-029"]) == 0
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if line.startswith("read by en-029"))
    assert row.split()[-1] == "0"  # no kept clip with another sentence's text
    assert "aligner" in printed and "x real time" in printed


@pytest.mark.xdist_group("segment")
def test_the_no_transcript_benchmark_prints_its_speed_and_stages(capsys):
    needs_speech_models()
    from benchmarks.segment_no_transcript import main

    assert main(["--recordings", "4", "--processes", "1"]) == 0
    printed = capsys.readouterr().out
    assert "4 recordings" in printed and "x real time; 4 clips to review.csv" in printed
    assert "recogniser" in printed and "all stages" in printed
