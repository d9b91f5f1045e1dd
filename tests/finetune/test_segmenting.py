"""Long recordings in (`recordings`, `python -m tpu_demo.segment`): cut at pauses into clips within bounds,
transcribed, aligned to a recording's own text, loudness-normalised, filtered with a reason for every clip dropped,
resumable, shared by processes, and trained on.

The "words" here are tones, one pitch per word, and a test recogniser names each tone's word: the cuts, the alignment
and the filters are then checked against what is known to be said. The command runs with a tiny random recogniser
saved to a folder, as a user's Whisper would be: its transcripts are nonsense, the plumbing is real."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from tests.demo_utils import CONFIG, assert_ok, run_demo, run_main, tiny_asr, tiny_codec
from tests.testing_utils import ROOT, accelerate_launch, bug_on_unpatched, require_dia
from tpu_demo.errors import FineTuneError

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytest.importorskip("jiwer", reason="aligning a recording's text needs jiwer (pip install jiwer)")
pytestmark = require_dia

RATE = 16000
PITCH = {"one": 300, "two": 450, "three": 600, "four": 750, "five": 900, "six": 1050, "seven": 1200}


def say(words, gaps, rate=RATE, level=0.3, word_seconds=0.6) -> np.ndarray:
    """Each word a tone of its pitch, followed by its gap of silence; 0.3 s of silence first."""
    t = np.arange(int(word_seconds * rate)) / rate
    parts = [np.zeros(int(0.3 * rate))]
    for word, gap in zip(words, gaps, strict=True):
        parts += [level * np.sin(2 * np.pi * PITCH[word] * t), np.zeros(int(gap * rate))]
    return np.concatenate(parts).astype(np.float32)


def hear(samples, rate) -> str:
    """The test recogniser: the word of each tone in `samples` (tones apart by any quiet window)."""
    from tpu_demo.data.segmenting import WINDOW, window_levels

    levels, size = window_levels(np.asarray(samples), rate), int(WINDOW * rate)
    loud = np.flatnonzero(levels > levels.max() - 30)
    runs = np.split(loud, np.flatnonzero(np.diff(loud) > 1) + 1) if len(loud) else []
    words = []
    for run in runs:
        chunk = np.asarray(samples[run[0] * size : (run[-1] + 1) * size])
        peak = np.fft.rfftfreq(len(chunk), 1 / rate)[np.argmax(np.abs(np.fft.rfft(chunk)))]
        words.append(min(PITCH, key=lambda word: abs(PITCH[word] - peak)))
    return " ".join(words)


def settings(**changes):
    from tpu_demo.config.arguments import RecordingsArguments

    return RecordingsArguments(**{"recordings": "in", "min_clip_seconds": 0.5, "max_clip_seconds": 2.0} | changes)


def recording(tmp_path, words, gaps, text=None, name="talk", **sound):
    from tpu_demo.data.segmenting import Recording

    path = tmp_path / f"{name}.wav"
    soundfile.write(path, say(words, gaps, **sound), RATE)
    return Recording(path, name, None, text)


def test_clips_are_cut_at_pauses_and_joined_up_to_the_longest(tmp_path):
    from tpu_demo.data.segmenting import segment

    # 0.5 s gaps are pauses, the 0.1 s gap is not; joining across a pause would pass 2 s
    talk = recording(tmp_path, ["one", "two", "three", "four"], [0.5, 0.1, 0.5, 0.5])
    clips = segment(talk, settings(), hear, tmp_path / "out")
    assert [clip.transcript for clip in clips] == ["one", "two three", "four"]
    assert all(clip.seconds <= 2.0 and not clip.dropped for clip in clips)
    assert clips[0].start == pytest.approx(0.3 - 0.12, abs=0.021)  # the pause's edge kept before the speech
    # with room for two, a pause stays inside a clip
    assert [clip.transcript for clip in segment(talk, settings(max_clip_seconds=3), hear, tmp_path / "o")] == [
        "one two three",
        "four",
    ]


def test_a_recordings_own_text_is_split_over_its_clips_with_the_turns(tmp_path):
    from tpu_demo.data.segmenting import segment

    text = "[S1] One, two... [S2] Three - four!"
    talk = recording(tmp_path, ["one", "two", "three", "four"], [0.5, 0.1, 0.5, 0.5], text=text)
    clips = segment(talk, settings(), hear, tmp_path / "out")
    # a clip that starts inside a turn says whose turn it is; punctuation stays where it was written
    assert [clip.text for clip in clips] == ["[S1] One,", "[S1] two... [S2] Three -", "[S2] four!"]


def test_alignment_survives_misheard_and_unheard_words():
    from tpu_demo.data.segmenting import align

    text = "one two three four five six"
    # "to" for "two" is a replacement; "five" heard nowhere goes with the word before it
    assert align(text, ["one to", "three four", "six"]) == ["[S1] one two", "[S1] three four five", "[S1] six"]
    assert align(text, []) == []


def test_every_dropped_clip_says_why(tmp_path):
    from tpu_demo.data.segmenting import segment

    blip = recording(tmp_path, ["one"], [0.5], name="blip", word_seconds=0.2)
    long = recording(tmp_path, ["two"], [0.5], name="long", word_seconds=2.5)
    loud = recording(tmp_path, ["three"], [0.5], name="loud", level=1.5)  # written clipped at full scale
    quiet_words = recording(tmp_path, ["one", "two"], [0.5, 0.5], name="mumbled", text="five six")
    found = {
        talk.name: segment(talk, settings(), hear, tmp_path / "out")[0] for talk in (blip, long, loud, quiet_words)
    }
    assert {name: clip.dropped for name, clip in found.items()} == {
        "blip": "too short",
        "long": "too long",
        "loud": "clipping",
        "mumbled": "recogniser disagrees",
    }
    assert found["mumbled"].detail == "CER 0.75 > max_asr_cer"  # "five six" heard as "one two": 6 of 8 letters
    assert not list((tmp_path / "out").rglob("*.wav"))  # nothing dropped is written


def test_a_noisy_recording_is_dropped_by_its_signal_to_noise(tmp_path):
    from tpu_demo.data.segmenting import segment

    talk = recording(tmp_path, ["one", "two"], [0.5, 0.5])
    audio, _ = soundfile.read(talk.path, dtype="float32")
    noise = (
        0.3 / np.sqrt(2) * 10 ** (-20 / 20) * np.random.default_rng(0).standard_normal(len(audio)).astype(np.float32)
    )
    soundfile.write(talk.path, audio + noise, RATE)  # a noise bed 20 dB under the words
    clips = segment(talk, settings(pause_db=-12, min_snr_db=25), hear, tmp_path / "out")
    assert {clip.dropped for clip in clips} == {"noisy"}
    assert all(18 < clip.snr_db < 23 for clip in clips)
    assert all(not clip.dropped for clip in segment(talk, settings(pause_db=-12, min_snr_db=15), hear, tmp_path))


def test_kept_clips_are_loudness_normalised(tmp_path):
    from tpu_demo.data.segmenting import WINDOW, segment, window_levels

    talk = recording(tmp_path, ["one", "two"], [0.5, 0.5], level=0.02)
    for clip in segment(talk, settings(target_dbfs=-20), hear, tmp_path / "out"):
        audio, _ = soundfile.read(tmp_path / "out" / clip.audio, dtype="float32")
        levels = window_levels(audio, RATE)
        speech = levels[levels > levels.max() - 35]
        assert 10 * np.log10(np.mean(10 ** (speech / 10))) == pytest.approx(-20, abs=0.3)
        assert np.abs(audio).max() < 10 ** (-1 / 20) and len(audio) == pytest.approx(clip.seconds * RATE, abs=WINDOW)


def test_clips_far_off_the_datas_pace_are_dropped():
    from tpu_demo.data.segmenting import Clip, drop_unusual_pace

    clips = [Clip("r", 0, seconds, text="[S1] " + "ab " * 10) for seconds in (2.0, 2.2, 1.9, 2.1, 5.0, 1.2)]
    drop_unusual_pace(clips, 2.0)
    assert [clip.dropped for clip in clips] == [None, None, None, None, "unusual pace", None]
    drop_unusual_pace(clips, 1.5)
    assert clips[-1].dropped == "unusual pace"


def user_recordings(folder: Path) -> Path:
    """Two speakers' folders of long recordings, three with their own text, at 16 and 22.05 kHz, WAV and FLAC."""
    for speaker, words, rate in (("alice", ["one", "two", "three", "four"], RATE), ("bob", ["five", "six"], 22050)):
        (folder / speaker).mkdir(parents=True)
        for number in (1, 2):
            suffix = "flac" if number == 2 else "wav"
            soundfile.write(folder / speaker / f"take{number}.{suffix}", say(words, [0.5] * len(words), rate), rate)
    (folder / "bob" / "take1.txt").write_text("[S1] Five, six.")
    (folder / "bob" / "take2.txt").write_text("[S1] Five six.")
    (folder / "alice" / "take1.txt").write_text("[S1] One two three four.")
    return folder


def segment_command(out, *overrides, processes=None):
    from tpu_demo.segment import main

    args = [str(CONFIG), f"dataset={out}", *overrides]
    if processes:
        return accelerate_launch(ROOT / "tpu_demo/segment.py", *args, num_processes=processes)
    return run_main(main, args)


def snapshot(folder: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@bug_on_unpatched  # the training part stops at the state on the published release
def test_segment_writes_a_dataset_training_reads_and_continues_where_it_stopped(tmp_path):
    raw = user_recordings(tmp_path / "podcast")
    before = snapshot(raw)
    common = [f"recordings={raw}", f"segment_asr_model={tiny_asr(tmp_path / 'asr')}", "max_asr_cer=1000",
              "min_clip_seconds=0.5", "max_clip_seconds=1.2", "pace_tolerance=1000"]  # fmt: skip
    out = tmp_path / "clips"
    result = segment_command(out, *common)
    assert_ok(result)
    assert "tpu_demo: 4 recordings" in result.stdout
    with open(out / "metadata.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    report = json.loads((out / "segment_report.json").read_text())
    clips = report["clips"]
    assert len(clips) == 12  # a clip per word: 4 + 4 of alice, 2 + 2 of bob
    kept = [clip for clip in clips if not clip["dropped"]]
    assert len(rows) == len(kept) == report["kept"]["clips"] and all((out / row["audio"]).is_file() for row in rows)
    assert [(row["audio"], row["speaker"]) for row in rows] == [(clip["audio"], clip["speaker"]) for clip in kept]
    dropped = {reason: counts["clips"] for reason, counts in report["dropped"].items()}
    assert sum(dropped.values()) == 12 - len(kept) and set(dropped) <= {"no text aligned"}
    # a recording's own text goes over its clips whole, in order (this recogniser hears nonsense, so where it is
    # cut is arbitrary; tests above check the cuts against a recogniser that hears the words)
    from tpu_demo.evaluation.intelligibility import normalise

    for name, text in (("bob/take1", "five six"), ("bob/take2", "five six"), ("alice/take1", "one two three four")):
        assert normalise(" ".join(clip["text"] for clip in clips if clip["recording"] == name)) == text
    assert snapshot(raw) == before  # nothing written beside the recordings

    # run again: nothing to do; lose one recording's part (an interruption): only it is done again
    made, metadata = snapshot(out), (out / "metadata.csv").read_text()
    assert_ok(segment_command(out, *common))
    assert {p: v for p, v in snapshot(out).items() if p.suffix == ".wav"} == {
        p: v for p, v in made.items() if p.suffix == ".wav"
    }
    part = next((out / ".segmenting").glob("*.json"))
    lost = {Path(clip["audio"]) for clip in json.loads(part.read_text())["clips"] if clip["audio"]}
    part.unlink()
    assert_ok(segment_command(out, *common))
    remade = {p.relative_to(out) for p, v in snapshot(out).items() if p.suffix == ".wav" and made.get(p) != v}
    assert remade == lost
    assert (out / "metadata.csv").read_text() == metadata

    # trained on, as the manifest it is; the recordings' settings must be the ones it was cut with
    # (the recogniser's nonsense is longer than max_text_tokens: alice's second take is not trained on)
    run = [f"codec={tiny_codec(tmp_path / 'codec')}", "max_steps=2", "eval_samples=2", "eval_steps=2",
           "max_audio_frames=128", "per_device_train_batch_size=2", *common]  # fmt: skip
    assert_ok(run_demo(tmp_path / "run", f"dataset={out}", *run, launcher=False))
    changed = run_demo(tmp_path / "run2", f"dataset={out}", *run, "min_snr_db=3", launcher=False)
    assert changed.returncode == 1 and "cut from other recordings or settings than" in changed.stderr
    never = run_demo(tmp_path / "run3", f"dataset={tmp_path / 'none'}", *run, launcher=False)
    assert never.returncode == 1 and "run `python -m tpu_demo.segment`" in never.stderr
    gone = run_demo(tmp_path / "run6", f"dataset={out}", *run, f"recordings={tmp_path / 'gone'}", launcher=False)
    assert gone.returncode == 1 and f"recordings {tmp_path / 'gone'}: no such folder" in gone.stderr
    # the recordings moved elsewhere are the same recordings; one more recording is not
    moved = raw.rename(tmp_path / "moved")
    assert_ok(run_demo(tmp_path / "run4", f"dataset={out}", *run, f"recordings={moved}", launcher=False))
    soundfile.write(moved / "bob" / "take3.wav", say(["five"], [0.5]), RATE)
    added = run_demo(tmp_path / "run5", f"dataset={out}", *run, f"recordings={moved}", launcher=False)
    assert added.returncode == 1 and "cut from other recordings or settings than" in added.stderr


def test_two_processes_share_the_recordings_and_write_the_same_dataset(tmp_path):
    raw = user_recordings(tmp_path / "podcast")
    common = [f"recordings={raw}", f"segment_asr_model={tiny_asr(tmp_path / 'asr')}", "max_asr_cer=1000",
              "min_clip_seconds=0.5", "max_clip_seconds=1.2"]  # fmt: skip
    assert_ok(segment_command(tmp_path / "one", *common))
    assert_ok(segment_command(tmp_path / "two", *common, processes=2))
    assert (tmp_path / "two/metadata.csv").read_text() == (tmp_path / "one/metadata.csv").read_text()
    reports = [json.loads((tmp_path / run / "segment_report.json").read_text()) for run in ("one", "two")]
    assert reports[0]["dropped"] == reports[1]["dropped"] and reports[0]["kept"] == reports[1]["kept"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["dataset={raw}/clips"], "must be a folder apart from the recordings"),
        (["dataset=synthetic"], "recordings: set `dataset` to the new folder"),
        (["dataset={foreign}"], "holds files tpu_demo.segment did not write"),
        (["dataset={tmp}/out", "segment_asr_model=", "eval_asr_model="], "recordings: set segment_asr_model"),
        (["dataset={tmp}/out", "recordings={tmp}/nowhere"], "recordings {tmp}/nowhere: no such folder"),
        (["dataset={tmp}/out", "max_clip_seconds=0.5"], "max_clip_seconds: 0.5 is not more than min_clip_seconds"),
    ],
)
def test_segment_refuses_before_any_work(tmp_path, overrides, message):
    raw = tmp_path / "raw"
    raw.mkdir()
    soundfile.write(raw / "a.wav", say(["one"], [0.5]), RATE)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "mine.txt").write_text("a user's file")
    names = {"raw": raw, "tmp": tmp_path, "foreign": tmp_path / "foreign"}
    args = [f"recordings={raw}", f"segment_asr_model={tmp_path / 'asr'}", *(o.format(**names) for o in overrides)]
    from tpu_demo.segment import main

    result = run_main(main, [str(CONFIG), *args])
    assert result.returncode == 1 and message.format(**names) in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and sorted(p.name for p in raw.iterdir()) == ["a.wav"]


def test_recordings_are_checked_readable_and_distinct_before_any_work(tmp_path):
    from tpu_demo.data.segmenting import find_recordings

    (tmp_path / "a.wav").write_bytes(b"not audio")
    with pytest.raises(FineTuneError, match="recordings: a.wav: unreadable audio"):
        find_recordings(tmp_path)
    soundfile.write(tmp_path / "a.wav", say(["one"], [0.5]), RATE)
    soundfile.write(tmp_path / "a.flac", say(["one"], [0.5]), RATE)
    with pytest.raises(FineTuneError, match="a.flac and a.wav would make clips of one name"):
        find_recordings(tmp_path)


def test_segment_settings_without_recordings_are_refused():
    from tpu_demo.config.checks import check_config
    from tpu_demo.config.load import load_raw

    with pytest.raises(FineTuneError, match="max_clip_seconds: set, but there are no recordings to cut"):
        check_config(load_raw(CONFIG, ["max_clip_seconds=10"]))


def test_long_recordings_are_read_block_by_block_with_the_same_levels(tmp_path):
    from tpu_demo.data.segmenting import WINDOW, scan, window_levels

    rng = np.random.default_rng(0)
    stereo = (rng.standard_normal((int(65.013 * RATE), 2)) * 0.1).astype(np.float32)  # past one 60 s block
    stereo[int(59.99 * RATE) : int(60.03 * RATE), 1] = 1.0  # full scale on one channel, across the block boundary
    soundfile.write(tmp_path / "long.flac", stereo, RATE, subtype="PCM_24")
    levels, clipped, rate = scan(tmp_path / "long.flac")
    audio, _ = soundfile.read(tmp_path / "long.flac", dtype="float32")
    assert rate == RATE and np.allclose(levels, window_levels(audio.mean(axis=1), RATE), atol=1e-4)
    size = int(WINDOW * RATE)
    expected = (np.abs(audio) >= 0.999).any(axis=1)[: len(levels) * size].reshape(-1, size).sum(axis=1)
    assert np.array_equal(clipped, expected) and clipped.sum() == int(0.04 * RATE)


def test_the_recordings_language_goes_to_the_dataset_and_to_a_whisper(tmp_path, monkeypatch):
    raw = user_recordings(tmp_path / "podcast")
    args = [f"recordings={raw}", f"segment_asr_model={tiny_asr(tmp_path / 'asr')}", "max_asr_cer=1000",
            "min_clip_seconds=0.5", "max_clip_seconds=1.2", "segment_language=de"]  # fmt: skip
    assert_ok(segment_command(tmp_path / "clips", *args))
    with open(tmp_path / "clips" / "metadata.csv", newline="") as f:
        assert {row["language"] for row in csv.DictReader(f)} == {"de"}  # training puts [de] before each text

    # a Whisper is told the language (a recogniser of one language, as the tiny one, has none to be told)
    import transformers

    from tpu_demo.evaluation.intelligibility import Transcriber

    class Whisper:
        model = type("Model", (), {"config": type("Config", (), {"model_type": "whisper"})})
        feature_extractor = type("Extractor", (), {"sampling_rate": RATE})

        def __call__(self, audio, **options):
            self.options = options
            return {"text": " hallo "}

    monkeypatch.setattr(transformers, "pipeline", lambda *args, **kwargs: Whisper())
    transcriber = Transcriber("whisper", key="segment_asr_model", language="de")
    assert transcriber(say(["one"], [0.1]), RATE) == "hallo"
    assert transcriber.pipeline.options == {"generate_kwargs": {"language": "de"}}
    with pytest.raises(FineTuneError, match="segment_language: Whisper knows no language 'klingon'"):
        Transcriber("whisper", key="segment_asr_model", language="klingon")


def test_an_interrupted_segmenting_says_how_to_continue_and_continues(tmp_path, monkeypatch):
    import tpu_demo.segment

    raw = user_recordings(tmp_path / "podcast")
    args = [f"recordings={raw}", f"segment_asr_model={tiny_asr(tmp_path / 'asr')}", "max_asr_cer=1000",
            "min_clip_seconds=0.5", "max_clip_seconds=1.2"]  # fmt: skip
    done, segment = [], tpu_demo.segment.segment

    def stopped_after_one(*arguments):
        if done:
            raise KeyboardInterrupt  # Ctrl-C during the second recording
        done.append(1)
        return segment(*arguments)

    monkeypatch.setattr(tpu_demo.segment, "segment", stopped_after_one)
    stopped = segment_command(tmp_path / "clips", *args)
    assert stopped.returncode == 1 and "interrupted; the recordings done are kept" in stopped.stderr
    assert "Traceback" not in stopped.stderr and not (tmp_path / "clips" / "metadata.csv").exists()
    monkeypatch.setattr(tpu_demo.segment, "segment", segment)
    again = segment_command(tmp_path / "clips", *args)
    assert_ok(again)
    assert "1 of this process's 4 recordings done before" in again.stdout


def test_a_refused_segmenting_leaves_no_folder_behind(tmp_path):
    raw = user_recordings(tmp_path / "podcast")
    refused = segment_command(tmp_path / "clips", f"recordings={raw}", f"segment_asr_model={tmp_path / 'no-asr'}")
    assert refused.returncode == 1 and "no such folder" in refused.stderr and not (tmp_path / "clips").exists()
