"""Faults a tool downstream fixes are no reason to drop speech: the segmenter judges each piece after removing DC and
levelling it (tpu_demo.data.speech_models.without_dc, levelled), so quiet speech and speech with a DC offset are kept
(they were dropped as `other voice` and `noisy`), and their clips are written without the offset. A 0.3 s file is
`too short`, whatever its voice."""

import numpy as np
import pytest

from tests import planted_faults
from tests.finetune.test_segmenting import needs_speech_models, recording, scores_by_recording, segmented, settings
from tests.testing_utils import require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia


def test_levelling_removes_dc_and_level_and_nothing_else():
    pytest.importorskip("pyloudnorm", reason="levelling needs pyloudnorm (the `speech` extra)")
    pytest.importorskip("scipy", reason="removing DC needs scipy")
    from tpu_demo.segmenting.read import levelled, without_dc

    rate, t = 16000, np.arange(32000) / 16000
    tone = (0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t)) / 2).astype(np.float32)
    assert abs(float(without_dc(tone + 0.2, rate).mean())) < 1e-3
    assert np.allclose(without_dc(tone + 0.2, rate)[1600:-1600], tone[1600:-1600], atol=0.01)  # speech untouched
    loud, quiet = levelled(tone), levelled(tone * 0.01)
    assert np.allclose(loud, quiet, atol=1e-4) and 0.05 < np.abs(loud).max() <= 0.99
    assert np.abs(levelled(tone[:3000] * 0.001)).max() > 0.05  # shorter than BS.1770's 0.4 s: by its RMS


def test_a_recording_shorter_than_a_clip_is_too_short_whatever_else():
    from tpu_demo.segmenting.judge import judge
    from tpu_demo.segmenting.measure import Piece

    found = [Piece(0.0, 0.29, snr_db=3.0, dnsmos={"sig": 1.0, "bak": 1.0, "ovrl": 1.0})]
    judge(found, recording(), settings(min_clip_seconds=1.0))
    assert (found[0].dropped, found[0].detail) == (
        "too short",
        "all the speech of its recording is 0.29 s < min_clip_seconds",
    )


@pytest.mark.xdist_group("segment")
def test_quiet_speech_and_a_dc_offset_are_kept_levelled_and_a_short_file_is_too_short(tmp_path):
    # quiet speech was dropped as `other voice`, a DC offset of 0.2 as `noisy` (SNR -11 dB), a 0.3 s file as
    # `other voice`
    needs_speech_models()
    raw = tmp_path / "recordings"
    truth = planted_faults.write_levelling_faults(raw)
    clean, said = planted_faults.talk(planted_faults.SENTENCES[:4], planted_faults.VOICES["alice"], 16000, seed=5)
    soundfile.write(raw / "alice/clean.wav", clean, 16000)
    truth["alice/clean"] = {"file": "alice/clean.wav", "fault": "none", "rate": 16000, "seconds": len(clean) / 16000,
                            "sentences": [vars(s) for s in said]}  # fmt: skip
    out = tmp_path / "out"
    report = segmented(raw, out)
    scores = scores_by_recording(truth, report)
    for name in ("alice/quiet", "alice/dc-offset", "alice/clean"):
        assert scores[name]["good_lost"] < 0.5, (name, scores[name])
    assert scores["alice/short-file"]["reasons"] == {"too short": 1}
    for clip in report["clips"]:
        if clip["recording"] == "alice/dc-offset" and not clip["dropped"]:
            audio, _ = soundfile.read(out / clip["audio"])
            assert abs(float(audio.mean())) < 0.005  # written without the offset
