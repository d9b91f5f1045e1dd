"""A recording of several channels is judged by its channels (tpu_demo.segmenting.read.speech_channel): the speech
is read from the channel that holds it where the others hold only noise; a stereo recording of speech in both is
mixed, as before."""

import numpy as np
import pytest

from tests import planted_speech
from tests.finetune.test_segmenting import segment_planted, soundfile
from tests.testing_utils import require_dia

pytestmark = require_dia


def test_the_channel_with_the_speech_is_chosen_and_a_stereo_of_speech_is_mixed(tmp_path):
    from tpu_demo.segmenting.read import speech_channel

    rng = np.random.default_rng(0)
    t = np.arange(5 * 16000) / 16000
    speech = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0)).astype(np.float32)
    noise = (0.1 * rng.standard_normal(len(t))).astype(np.float32)
    files = {"right.wav": (noise, speech), "both.wav": (speech, 0.8 * speech), "mono.wav": (speech,)}
    for name, channels in files.items():
        soundfile.write(tmp_path / name, np.stack(channels, axis=1), 16000)
    assert speech_channel(tmp_path / "right.wav") == 1
    assert speech_channel(tmp_path / "both.wav") is None
    assert speech_channel(tmp_path / "mono.wav") is None


@pytest.mark.xdist_group("segment")
def test_speech_in_one_channel_and_noise_in_the_other_is_kept_and_the_channel_named(tmp_path):
    _, report, scores = segment_planted(planted_speech.write_one_channel_stereo, tmp_path)
    row = scores["channels/left-speech"]
    assert row["good_kept"] >= 0.95 * row["good_seconds"] and row["wrong_text"] == 0, row
    assert report["channels"] == {"channels/left-speech": "left of 2"}


def test_clipping_in_a_channel_not_read_is_no_fault_of_the_speech(tmp_path):
    from tpu_demo.segmenting.read import read_recording, speech_channel

    t = np.arange(4 * 16000) / 16000
    speech = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0)).astype(np.float32)
    hum = np.clip(2 * np.sin(2 * np.pi * 50 * t), -1, 1).astype(np.float32)  # a hum clipped at full scale
    soundfile.write(tmp_path / "left.wav", np.stack([speech, hum], axis=1), 16000, subtype="FLOAT")
    assert speech_channel(tmp_path / "left.wav") == 0
    assert read_recording(tmp_path / "left.wav", 0)[1]["clipped"].sum() == 0
    assert read_recording(tmp_path / "left.wav")[1]["clipped"].sum() > 0  # mixed, the hum's clipping is heard


def test_a_float_recording_over_full_scale_is_not_clipped_and_a_flat_top_is(tmp_path):
    # A DAW exports 32-bit float with peaks over 1.0 and nothing lost; clipping is a top held flat, at any scale
    from tpu_demo.segmenting.read import read_recording

    t = np.arange(4 * 16000) / 16000
    speech = (1.6 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0)).astype(np.float32)
    soundfile.write(tmp_path / "loud.wav", speech, 16000, subtype="FLOAT")
    assert read_recording(tmp_path / "loud.wav")[1]["clipped"].sum() == 0
    soundfile.write(tmp_path / "clipped.wav", np.clip(speech, -1, 1), 16000, subtype="PCM_16")
    assert read_recording(tmp_path / "clipped.wav")[1]["clipped"].sum() > 0
