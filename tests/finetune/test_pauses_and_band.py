"""What lies between the pieces and outside the speech band: no clip joined across a long pause or across a cough in
a pause, a burst in a pause kept out of its neighbours' noise, and a band-limited piece (a telephone's band stored at
44.1 kHz) dropped by its measured bandwidth."""

import numpy as np
import pytest

from tests import planted_faults
from tests.finetune.test_segmenting import (
    needs_speech_models,
    no_marks,
    pieces,
    recording,
    scores_by_recording,
    segmented,
    settings,
)
from tests.testing_utils import require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia


def test_no_clip_is_joined_across_a_long_pause_or_a_sound_in_a_pause():
    from tpu_demo.segmenting.join import join

    found = pieces((0.5, 1.5), (1.7, 2.9), (5.5, 6.5), (6.8, 7.6), (8.0, 9.0), snr_db=40.0)
    found[4].sound_before = True  # a cough between 7.6 and 8.0
    clips = join(found, recording(), 10.0, settings(max_clip_seconds=10.0, min_clip_seconds=0.5))
    # one clip was 0.35..6.65: 2.6 s of it the pause
    assert [(clip.start, clip.end) for clip in clips] == [(0.35, 3.05), (5.35, 7.75), (7.85, 9.15)]


def test_a_burst_in_a_pause_is_not_its_neighbours_noise():
    from tpu_demo.segmenting.measure import measure

    rng = np.random.default_rng(0)
    rate, t = 16000, np.arange(2 * 16000) / 16000
    speech = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)

    def pause(cough):
        quiet = (1e-3 * rng.standard_normal(rate)).astype(np.float32)  # 40 dB under the speech
        if cough:
            quiet[7000:8600] += (0.4 * rng.standard_normal(1600) * np.exp(-np.arange(1600) / 400)).astype(np.float32)
        return quiet

    snrs = []
    for cough in (False, True):
        audio = np.concatenate([pause(cough), speech, pause(cough), speech, pause(cough)])
        found = measure(audio, no_marks(len(audio) / rate), rate, [(1.0, 3.0), (4.0, 6.0)], lambda x: {},
                        lambda x: ([], []))  # fmt: skip
        snrs.append([piece.snr_db for piece in found])
        assert [piece.sound_before for piece in found] == [False, cough]
    assert np.allclose(snrs[0], snrs[1], atol=1.0) and min(snrs[1]) > 35, snrs  # it read as 8.6 dB


def test_a_band_limited_piece_is_dropped_by_its_bandwidth():
    pytest.importorskip("scipy", reason="the bandwidth needs scipy")
    from scipy.signal import butter, sosfiltfilt

    from tpu_demo.segmenting.judge import judge
    from tpu_demo.segmenting.measure import bandwidth

    noise = np.random.default_rng(0).standard_normal(16000 * 2)
    telephone = sosfiltfilt(butter(8, [300, 3400], btype="bandpass", fs=16000, output="sos"), noise)
    assert bandwidth(noise) > 7500 and 3400 < bandwidth(telephone) < 4500
    found = pieces((0, 2), (3, 5), snr_db=40.0)
    found[0].bandwidth_hz, found[1].bandwidth_hz = bandwidth(telephone), bandwidth(noise)
    judge(found, recording(), settings())
    assert found[0].dropped == "band-limited" and found[0].detail.startswith("bandwidth 4.")
    assert found[0].detail.endswith(" kHz < 6 kHz") and found[1].dropped is None


@pytest.mark.xdist_group("segment")
def test_bursts_long_pauses_and_a_telephone_band_in_real_recordings(tmp_path):
    # sentences between coughs were dropped as `noisy` (8.6 dB, true 41), a clip held a 6 s pause, a telephone band
    # was kept with nothing said
    needs_speech_models()
    truth = planted_faults.write_pause_faults(tmp_path / "recordings")
    scores = scores_by_recording(truth, segmented(tmp_path / "recordings", tmp_path / "out"))
    bursts, pause, telephone = scores["alice/bursts"], scores["alice/long-pause"], scores["bob/telephone"]
    assert bursts["good_lost"] < 0.5 and bursts["faulty_kept"] == 0, bursts
    assert pause["good_lost"] < 0.5 and pause["longest_silence_kept"] < 2.5, pause
    assert set(telephone["reasons"]) == {"band-limited"} and telephone["faulty_kept"] == 0, telephone


def test_a_short_reply_is_measured_with_the_speech_nearest_it_and_a_telephone_band_stays_narrow():
    # flite awb's "No." and "I know." reached 3.8-4.1 kHz alone, as a telephone's band does: full-band replies and
    # sentences under 5 s were dropped as band-limited (79 % of a 26-minute reading kept)
    needs_speech_models()
    if not planted_faults.shutil.which("flite"):
        pytest.skip("flite's voices: apt install flite")
    from scipy.signal import butter, sosfiltfilt

    from tpu_demo.segmenting.judge import MIN_BANDWIDTH_HZ
    from tpu_demo.segmenting.measure import measure

    said = ["We should clean out the garage before winter.", "No.", "The harbour lights came on one by one.",
            "I know.", "Maybe more.", "Thank you very much, see you soon."]  # fmt: skip
    samples, sentences = planted_faults.talk(said * 3, "flite:awb", 16000, seed=1)
    spans = [(sentence.start, sentence.end) for sentence in sentences]
    full = measure(samples, no_marks(len(samples) / 16000), 16000, spans)
    assert all(piece.bandwidth_hz >= MIN_BANDWIDTH_HZ for piece in full), [piece.bandwidth_hz for piece in full]
    # the last twelve through a telephone's band: the last one's nearest 10 s of speech are all the telephone's
    band = sosfiltfilt(butter(8, [300, 3400], btype="bandpass", fs=16000, output="sos"), samples).astype(np.float32)
    mixed = np.concatenate([samples[: int(spans[6][0] * 16000) - 800], band[int(spans[6][0] * 16000) - 800 :]])
    found = measure(mixed, no_marks(len(mixed) / 16000), 16000, spans)
    assert all(piece.bandwidth_hz >= MIN_BANDWIDTH_HZ for piece in found[:6]), [piece.bandwidth_hz for piece in found]
    assert found[-1].bandwidth_hz < 4500, [piece.bandwidth_hz for piece in found]
    telephone = measure(band, no_marks(len(band) / 16000), 16000, spans)
    assert all(piece.bandwidth_hz < 4500 for piece in telephone), [piece.bandwidth_hz for piece in telephone]
