"""Faults inside a piece of speech (tpu_demo.segmenting.read, measure): a digital dropout, a step in the recording's
level, clicks; each drops its piece with its reason, while the same speech without them is kept."""

import numpy as np
import pytest

from tests import planted_speech
from tests.demo_utils import assert_ok
from tests.finetune.test_segmenting import pieces, segment_planted
from tests.testing_utils import require_dia

pytestmark = require_dia
RATE = 16000


def sentence(seed=0, seconds=3.0):
    """A speech-like signal: 4 "syllables" a second of a 200 Hz buzz with harmonics, under a noise floor."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    buzz = sum(np.sin(2 * np.pi * 200 * k * t) / k for k in range(1, 8))
    envelope = np.clip(np.sin(2 * np.pi * 2 * t), 0, None) ** 0.5
    return (0.1 * buzz * envelope + 1e-3 * rng.standard_normal(len(t))).astype(np.float32)


def test_digital_silence_inside_speech_is_a_dropout_a_pause_is_not():
    from tpu_demo.segmenting.read import digital_silences

    speech = sentence()
    speech[9200:10800] = 0.0  # 100 ms gone mid-syllable
    found = digital_silences(np.concatenate([np.zeros(8000, np.float32), speech]), RATE)
    assert [(round(start, 2), round(seconds, 2)) for start, seconds, *_ in found] == [(1.08, 0.1)]
    assert min(found[0][2:4]) > -40 and found[0][4] > 0.02  # speech on both sides, cut mid-waveform
    # a TTS's gap (or a noise gate's) starts and ends where the waveform is at zero: no dropout, however loud around
    voiced = (0.3 * np.sin(2 * np.pi * 200 * np.arange(1600) / RATE)).astype(np.float32)
    fade = np.sin(np.linspace(0, np.pi / 2, 32, dtype=np.float32)) ** 2  # 2 ms into and out of silence
    voiced[:32] *= fade
    voiced[-32:] *= fade[::-1]
    gap = digital_silences(np.concatenate([voiced, np.zeros(800, np.float32), voiced]), RATE)
    assert len(gap) == 1 and gap[0][4] < 0.02


def test_one_sample_off_its_neighbours_is_a_click_speech_is_not():
    from tpu_demo.segmenting.read import click_samples

    speech, window = sentence(), np.arange(3 * RATE) // 160  # 10 ms windows
    assert not click_samples(speech, window).any()
    speech[8000] = 0.9
    assert np.flatnonzero(click_samples(speech, window)).tolist() == [8000]


def test_a_voices_pulse_beside_a_pause_is_no_click_a_spike_there_is():
    # espeak-ng's first or last glottal pulse of a voiced stretch, at its own 22.05 kHz, stood 12-15 times the RMS of
    # its 10 ms window, which was mostly pause: 36 pieces of a held-out 30-minute reading were dropped as `clicks`;
    # a spike 2 or 8 ms after the speech (a splice) is still one
    from tests import planted_faults
    from tpu_demo.segmenting.read import click_samples

    for voice, number in (("en-gb-x-rp", 2), ("en-sc", 18), ("en-us+m3", 15)):
        try:
            said = planted_faults.speak(planted_faults.SENTENCES[number], voice, 22050)
        except planted_faults.NoEspeak as error:
            pytest.skip(str(error))
        window = np.arange(len(said)) // 220
        assert not click_samples(said, window).any(), voice
        for after in (44, 176, 3000):  # 2 ms, 8 ms and 136 ms after the speech
            pause = np.concatenate([said, np.zeros(4410, np.float32)])
            pause[len(said) + after] = 0.5
            assert np.flatnonzero(click_samples(pause, np.arange(len(pause)) // 220)).tolist() == [len(said) + after]


def test_marks_are_on_10_ms_windows_at_any_rate(tmp_path):
    # at 22.05 kHz, windows of rate // 100 = 220 samples drifted: a click at 110 s was marked at 110.25 s
    from tests.finetune.test_segmenting import soundfile
    from tpu_demo.segmenting.read import read_recording

    rate = 22050
    noise = (0.01 * np.random.default_rng(0).standard_normal(120 * rate)).astype(np.float32)
    noise[110 * rate] = 0.9
    soundfile.write(tmp_path / "long.wav", noise, rate, subtype="FLOAT")
    marks = read_recording(tmp_path / "long.wav")[1]
    assert len(marks["level"]) == 12001 and np.flatnonzero(marks["clicks"]).tolist() == [11000]


def test_a_level_step_inside_speech_is_found_and_a_louder_turn_after_a_pause_is_no_fault():
    from tpu_demo.segmenting.measure import inner_fault, level_steps

    speech = np.concatenate([sentence(0, 6.0), sentence(1, 6.0)])
    level = 10 * np.log10(np.mean(speech[: len(speech) // 160 * 160].reshape(-1, 160) ** 2, axis=1) + 1e-12)
    spans = [(0.0, 12.0)]
    assert level_steps(level, spans) == []
    stepped = level.copy()
    stepped[750:] += 12.0  # +12 dB from 7.5 s on
    steps = level_steps(stepped, spans)
    assert len(steps) == 1 and 7.0 < steps[0][0] < 8.0 and steps[0][1] > 9
    marks = {"level": stepped, "dropouts": [], "clicks": np.zeros(len(stepped), bool)}
    inside, before = pieces((6.5, 9.0), (3.0, 6.0))
    assert inner_fault(inside, marks, steps)[0] == "level step"
    assert inner_fault(before, marks, steps) == (None, "")


def test_a_voice_falling_inside_its_sentences_is_no_level_step():
    # flite awb reading prices and dates: the median level of 2 s each side moved 9-11 dB with what was said, and 8
    # of its sentences were dropped as `level step` with no step made
    from tests.planted_faults import shutil, talk

    if not shutil.which("flite"):
        pytest.skip("flite's voices: apt install flite")
    from tpu_demo.segmenting.measure import level_steps

    said = ["The plant pot was thirty three dollars and ten cents, which seemed cheap.",
            "The teapot was thirty three dollars and ninety five cents, which seemed cheap.",
            "The lamp was twenty dollars and twenty five cents, which seemed cheap.",
            "About sixty six percent of the tickets were sold by August thirteenth.",
            "The repair came to five pounds fifty, plus parts.",
            "The book was seventeen dollars and twenty five cents, which seemed cheap."]  # fmt: skip
    speech, sentences = talk(said, "flite:awb", RATE, seed=2)
    level = 10 * np.log10(np.mean(speech[: len(speech) // 160 * 160].reshape(-1, 160) ** 2, axis=1) + 1e-12)
    spans = [(found.start, found.end) for found in sentences]
    assert level_steps(level, spans) == []  # a gain step in real speech is still found: the test after this one


@pytest.mark.xdist_group("segment")
def test_dropouts_a_gain_step_and_clicks_drop_their_sentences_only(tmp_path):
    row = segment_planted(planted_speech.write_faults_in_pieces, tmp_path)[2]["faults/in-pieces"]
    assert row["faulty_kept"] <= 1.0 and row["good_kept"] >= 0.95 * row["good_seconds"], row
    assert set(row["reasons"]) == {"dropout", "level step", "clicks"}, row
    assert row["wrong_text"] == 0, row  # the kept clips carry their own text


def test_a_louder_voice_after_a_pause_is_no_level_step_where_the_steepest_point_misses_the_pause():
    # a louder turn 0.5 s after another, in one recording: the steepest point of the 2 s medians fell 0.2 s into the
    # next turn, and that piece was dropped as `level step` (7 of a dialogue's pieces, flite's slt and kal16)
    from tpu_demo.segmenting.measure import level_steps

    speech = np.concatenate([sentence(0, 6.0), np.zeros(8000, np.float32), 4.0 * sentence(1, 6.0)])
    level = 10 * np.log10(np.mean(speech[: len(speech) // 160 * 160].reshape(-1, 160) ** 2, axis=1) + 1e-12)
    assert level_steps(level, [(0.0, 6.0), (6.5, 12.5)]) == []
    stepped = np.concatenate([sentence(0, 6.0), 4.0 * sentence(1, 6.0)])  # the same, inside speech: a step
    level = 10 * np.log10(np.mean(stepped[: len(stepped) // 160 * 160].reshape(-1, 160) ** 2, axis=1) + 1e-12)
    assert len(level_steps(level, [(0.0, 12.0)])) == 1


LINES = (
    "Where did you put the map of the old town?", "It is in the drawer under the window.",
    "Did you check the train times for Monday?", "The first one leaves at half past eight.",
    "Then we should get up early, I suppose.", "I will set two alarms to be safe.",
    "Can you bring the small umbrella as well?", "Yes, and a warm coat for the evening.",
)  # fmt: skip


def stepped_talk(path, voices: list[str], gains: list[float]) -> None:
    """Eight lines, each turn 0.15 s after the other's (one piece a pair: no pause) and 0.8 s before the next pair,
    each voice at its gain: a level step inside each pair; a microphone's noise floor under it."""
    import soundfile

    from tests.planted_faults import speak

    rate, parts = 44100, [np.zeros(22050, np.float32)]
    for number, line in enumerate(LINES):
        parts.append((0.1 * gains[number % 2] * speak(line, voices[number % 2], rate)).astype(np.float32))
        parts.append(np.zeros(int((0.15 if number % 2 == 0 else 0.8) * rate), np.float32))
    samples = np.concatenate(parts)
    samples += (1e-4 * np.random.default_rng(0).standard_normal(len(samples))).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(path, samples, rate)


@pytest.mark.xdist_group("segment")
def test_a_level_step_where_the_speaker_changes_is_no_fault_and_one_voice_stepping_is(tmp_path):
    # a louder voice's turn 0.15 s after the other's: each such piece was dropped as `level step`
    import json

    from tests.finetune.test_segmenting import needs_speech_models, segment_command

    needs_speech_models()
    stepped_talk(tmp_path / "raw/two-voices.wav", ["flite:awb", "flite:slt"], [1.0, 3.5])
    stepped_talk(tmp_path / "raw/one-voice.wav", ["flite:rms", "flite:rms"], [1.0, 3.5])
    assert_ok(segment_command(tmp_path / "out", f"recordings={tmp_path / 'raw'}", "train_on_unchecked_text=true"))
    clips = json.loads((tmp_path / "out/segment_report.json").read_text())["clips"]
    two = [clip for clip in clips if clip["recording"] == "two-voices"]
    kept = sum(clip["end"] - clip["start"] for clip in two if not clip["dropped"])
    assert kept >= 0.75 * sum(clip["end"] - clip["start"] for clip in two), two
    assert sum(clip["dropped"] == "level step" for clip in clips if clip["recording"] == "one-voice") >= 1
