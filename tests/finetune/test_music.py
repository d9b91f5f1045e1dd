"""Music under speech (a podcast's bed) is found in the pauses: sustained tones whose notes change. Noise, a fan's
or a hum's steady tone, a room's reverberation and a quiet second talker are not music."""

import numpy as np
import pytest

from tests import planted_faults
from tests.finetune.test_segmenting import pieces, recording, settings
from tpu_demo.segmenting.judge import MUSIC_SHARE, judge
from tpu_demo.segmenting.measure import music_around, tone_frames

RATE = 16000


def spoken(voice: str, seed: int):
    try:
        return planted_faults.talk(planted_faults.SENTENCES[:8], voice, RATE, seed=seed)
    except planted_faults.NoEspeak as missing:
        pytest.skip(str(missing))


def under(speech, sentences, background: np.ndarray, db: float) -> np.ndarray:
    """`speech` with `background` `db` under its active speech."""
    level = np.sqrt(planted_faults.active_power(speech, sentences, RATE) / 10 ** (db / 10))
    return (speech + background[: len(speech)] / np.sqrt(np.mean(background**2)) * level).astype(np.float32)


def music_of(samples, sentences) -> list:
    frames = tone_frames(samples, [(s.start, s.end) for s in sentences])
    return [music_around(frames, s.start, s.end) for s in sentences]


@pytest.mark.parametrize("voice, seed", [("en+f3", 4), ("flite:kal", 5), ("flite:slt", 6)])
@pytest.mark.parametrize("db", [18, 30])
def test_a_music_bed_under_speech_is_heard_in_its_pauses(voice, seed, db):
    speech, sentences = spoken(voice, seed)
    bed = planted_faults.music(len(speech) / RATE + 1, RATE)
    assert min(music_of(under(speech, sentences, bed, db), sentences)) >= MUSIC_SHARE


def steady_tone(length: int) -> np.ndarray:
    """A fan: low rumble and its motor's 120 Hz and 240 Hz."""
    t = np.arange(length) / RATE
    rumble = np.cumsum(np.random.default_rng(1).standard_normal(length))
    rumble -= np.convolve(rumble, np.ones(4000) / 4000, "same")
    tone = np.sin(2 * np.pi * 120 * t) + 0.5 * np.sin(2 * np.pi * 240 * t)
    return rumble / np.sqrt(np.mean(rumble**2)) + 0.6 * tone


@pytest.mark.parametrize("background", ["white", "pink", "fan", "hall", "talker"])
def test_noise_a_steady_tone_reverberation_or_a_quiet_talker_is_no_music(background):
    speech, sentences = spoken("en+f3", 4)
    if background in ("white", "pink"):
        samples = planted_faults.add_noise(speech, sentences, RATE, 30, background)
    elif background == "fan":
        samples = under(speech, sentences, steady_tone(len(speech)), 28)
    elif background == "hall":  # every sentence in a room of 1 s reverberation, over a quiet noise floor
        from scipy.signal import fftconvolve

        times = np.arange(RATE) / RATE
        response = np.random.default_rng(2).standard_normal(RATE) * np.exp(-6.9 * times)
        samples = fftconvolve(speech, response)[: len(speech)].astype(np.float32)
        samples = planted_faults.add_noise(samples, sentences, RATE, 50)
    else:
        other, _ = planted_faults.talk(planted_faults.SENTENCES[10:20], "en+m3", RATE, seed=9, lead=0.0)
        samples = under(speech, sentences, np.resize(other, len(speech)), 22)
    assert max(music_of(samples, sentences)) < MUSIC_SHARE


def test_a_piece_with_music_under_it_is_dropped_with_its_share_unless_the_music_is_far_under():
    found = pieces((0.5, 3.5), (4.0, 7.0), (7.5, 10.5), snr_db=25.0)
    found[0].music, found[1].music, found[2].music = 0.6, 0.1, 0.6
    found[2].snr_db = 45.0  # music 45 dB under the voice: not heard over a room
    judge(found, recording(), settings())
    assert [piece.dropped for piece in found] == ["music", None, None]
    assert found[0].detail == "music under it: 60% of the pauses around it hold sustained tones of changing notes"
