"""The planted-fault recordings (tests/planted_faults.py) are what they say: sentence times where the speech is, noise
at its signal-to-noise, clipping inside one sentence only, a truncated WAV's header claiming more than the file holds;
and the scorer counts what a segment report kept and lost of them."""

import shutil

import numpy as np
import pytest

from tests import planted_faults as pf

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytest.importorskip("soxr", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
needs_espeak = pytest.mark.skipif(
    not shutil.which("espeak-ng"), reason="real speech needs espeak-ng (apt install espeak-ng)"
)
RATE = 16000


def outside(sentences, length, margin=0.05) -> np.ndarray:
    """The samples more than `margin` s away from every sentence."""
    mask = np.ones(length, bool)
    for sentence in sentences:
        mask[max(0, round((sentence.start - margin) * RATE)) : round((sentence.end + margin) * RATE)] = False
    return mask


@needs_espeak
def test_sentence_times_are_where_the_speech_is():
    samples, sentences = pf.talk(pf.SENTENCES[:3], "en+m3", RATE, seed=1)
    assert not np.any(samples[outside(sentences, len(samples), margin=0)])  # silence between the sentences
    size = int(0.005 * RATE)
    peak = np.max(samples**2)
    for sentence in sentences:
        speech = samples[pf.span(sentence, RATE)]
        assert len(speech) == pytest.approx((sentence.end - sentence.start) * RATE, abs=1)
        for edge in (speech[:size], speech[-size:]):  # sound right at both of its ends
            assert np.mean(edge**2) > peak * 10 ** (-50 / 10)
    pauses = [after.start - before.end for before, after in zip(sentences, sentences[1:], strict=False)]
    assert all(0.4 <= pause <= 1.2 for pause in pauses)


@needs_espeak
@pytest.mark.parametrize("kind, snr_db", [("white", 34), ("pink", 24), ("white", 14), ("pink", 10)])
def test_noise_is_at_its_signal_to_noise_measured_in_the_pauses(kind, snr_db):
    clean, sentences = pf.talk(pf.SENTENCES[3:9], "en+f3", RATE, seed=2)
    noisy = pf.add_noise(clean, sentences, RATE, snr_db, kind, seed=3)
    noise_power = np.mean(noisy[outside(sentences, len(noisy))].astype(np.float64) ** 2)
    # the noisy speech's power in the windows active in the clean speech, less the noise's
    speech = np.mean(noisy[pf.active(clean, sentences, RATE)].astype(np.float64) ** 2) - noise_power
    assert pf.active_power(clean, sentences, RATE) == pytest.approx(speech, rel=0.1)
    assert 10 * np.log10(speech / noise_power) == pytest.approx(snr_db, abs=0.5)
    assert np.abs(noisy).max() < 0.999


@needs_espeak
def test_noise_from_a_point_on_leaves_what_is_before_it_clean():
    clean, sentences = pf.talk(pf.SENTENCES[:4], "en+f3", RATE, seed=4)
    middle = (sentences[1].end + sentences[2].start) / 2
    noisy = pf.add_noise(clean, sentences, RATE, 10, "white", start=middle)
    first = round(middle * RATE)
    assert np.array_equal(noisy[:first], clean[:first]) and np.all(noisy[first:] != clean[first:])
    later = sentences[2:]
    noise_power = np.mean((noisy - clean)[first:].astype(np.float64) ** 2)
    assert 10 * np.log10(pf.active_power(clean, later, RATE) / noise_power) == pytest.approx(10, abs=0.01)


@needs_espeak
def test_clipping_is_confined_to_the_chosen_sentence():
    samples, sentences = pf.talk(pf.SENTENCES[:3], "en+f3", RATE, seed=5)
    clipped = pf.clip_sentence(samples, sentences[1], RATE)
    full = np.abs(clipped) >= 0.999
    inside = np.zeros(len(clipped), bool)
    inside[pf.span(sentences[1], RATE)] = True
    assert not full[~inside].any() and np.array_equal(clipped[~inside], samples[~inside])
    assert full[inside].mean() > 0.02 and np.abs(clipped).max() == 1.0


@needs_espeak
def test_a_truncated_wav_claims_more_frames_than_it_holds(tmp_path):
    samples, sentences = pf.talk(pf.SENTENCES[:3], "en+m3", RATE, seed=6)
    cut = (sentences[1].start + sentences[1].end) / 2
    held = pf.write_truncated(tmp_path / "cut.wav", samples, RATE, cut)
    claimed, present = pf.wav_frames(tmp_path / "cut.wav")
    assert claimed == len(samples) and present == round(cut * RATE) == round(held * RATE) < claimed
    read, _ = soundfile.read(tmp_path / "cut.wav", dtype="float32")  # what a reader gets: the frames before the cut
    assert len(read) <= present and np.allclose(read, samples[: len(read)], atol=1 / 32768)


def test_a_corrupt_file_is_no_audio(tmp_path):
    with pytest.raises(soundfile.LibsndfileError):
        soundfile.info(str(pf.write_corrupt(tmp_path / "corrupt.wav")))


@needs_espeak
def test_the_recordings_folder_and_its_truth(tmp_path):
    truth = pf.write_recordings(tmp_path, sentences=2)
    assert {name.split("/")[0] for name in truth} == {"alice", "bob"}
    assert sorted(p.suffix for p in tmp_path.rglob("*") if p.is_file()).count(".flac") == 1
    assert (tmp_path / "alice/clean.txt").read_text().split("\n")[:2] == [
        s["text"] for s in truth["alice/clean"]["sentences"]
    ]
    for name, planted in truth.items():
        if planted["fault"] in ("corrupt file", "truncated WAV"):
            continue
        info = soundfile.info(str(tmp_path / planted["file"]))
        assert info.samplerate == pf.RATES[name.split("/")[0]] and info.duration == pytest.approx(planted["seconds"])
    faults = {name: [s["fault"] for s in planted["sentences"] if s["faulty"]] for name, planted in truth.items()}
    assert faults["alice/clipped"] == ["clipping"] and faults["alice/other-voice"] == ["other voice"]
    assert faults["alice/white-noise-34db"] == [] and set(faults["bob/pink-noise-10db"]) == {"noise"}
    assert faults["alice/half-noisy"] == ["noise"] and faults["bob/truncated"] == ["truncated"]

    # a segmenter that does everything right: each sentence a clip, the faulty ones dropped, the corrupt file skipped
    clips = [
        {"recording": name, "start": s["start"], "end": s["end"], "dropped": s["fault"] if s["faulty"] else None}
        for name, planted in truth.items()
        for s in planted["sentences"]
    ]
    rows = {row["recording"]: row for row in pf.score(truth, {"clips": clips, "skipped": {"alice/corrupt": "x"}})}
    assert all(row["good_lost"] == row["faulty_kept"] == row["cuts_inside"] == 0 for row in rows.values())
    assert rows["alice/clipped"]["reasons"] == {"clipping": 1}
    assert rows["alice/corrupt"]["reasons"] == {"skipped: x": 1}


def test_the_scorer_counts_kept_lost_and_cut_speech():
    def said(start, end, faulty=False):
        return {"start": start, "end": end, "text": "words", "voice": "v", "faulty": faulty, "fault": "noise"}

    truth = {
        "a/talk": {"file": "a/talk.wav", "fault": "noise", "sentences": [said(1, 3), said(4, 6, True), said(7, 9)]},
        "a/bad": {"file": "a/bad.wav", "fault": "corrupt file", "sentences": []},
    }
    clips = [
        {"recording": "a/talk", "start": 0.9, "end": 3.1, "dropped": None},  # the first sentence, whole
        {"recording": "a/talk", "start": 3.9, "end": 5.0, "dropped": "noisy"},
        {"recording": "a/talk", "start": 5.0, "end": 8.0, "dropped": None},  # a second of the faulty, cut in the third
        {"recording": "a/talk", "start": 8.0, "end": 9.1, "dropped": "too short"},  # the third's end lost
    ]
    (talk, bad) = pf.score(truth, {"clips": clips})  # a report without `skipped`
    assert talk["reasons"] == {"noisy": 1, "kept": 1} and pf.reasons_text(talk["reasons"]) == "noisy, kept"
    assert talk["good_kept"] == pytest.approx(3.0) and talk["good_lost"] == pytest.approx(1.0)
    assert talk["faulty_kept"] == pytest.approx(1.0)
    assert talk["cuts_inside"] == 2  # 5.0 inside the second sentence, 8.0 inside the third
    assert talk["longest_silence_kept"] == pytest.approx(1.0)  # 6..7, between the second sentence and the third
    assert talk["wrong_text"] == 0  # the clips without a text are not judged by it
    clips[0]["text"], clips[2]["text"] = "[S1] Words!", "[S1] words words"  # the second's: 4..6 is not half in it
    assert pf.score(truth, {"clips": clips})[0]["wrong_text"] == 1
    assert bad["reasons"] == {"not in report": 1}
    skipped = {"skipped": [{"recording": "a/bad.wav", "reason": "unreadable"}]}
    assert pf.score(truth, skipped)[1]["reasons"] == {"skipped: unreadable": 1}
