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
