"""Dialogues (tpu_demo.segmenting.diarize, join): a recording of two voices without a transcript is diarized, each
turn tagged `[S1]`/`[S2]` by its voice (the recording's first voice `[S1]` in every clip); with a transcript its
tags are the turns; a clip holds whole turns; a non-verbal tag (`(laughs)`) stays in the text, its sound kept."""

import functools

import numpy as np
import pytest

from tests import planted_speech
from tests.finetune.test_segmenting import needs_speech_models, pieces, recording, segment_planted
from tests.finetune.test_segmenting import settings as recordings_settings
from tests.testing_utils import require_dia

pytestmark = require_dia


def voices(*spans_and_voices):
    """Pieces with unit voice embeddings: `(start, end, axis)`, the axis (0, 1, 2) a voice of its own, plus noise."""
    rng = np.random.default_rng(0)
    found = pieces(*[(start, end) for start, end, _ in spans_and_voices])
    for piece, (_, _, axis) in zip(found, spans_and_voices, strict=True):
        vector = np.zeros(16)
        vector[axis] = 1.0
        vector += 0.05 * rng.standard_normal(16)
        piece.voice = list(vector / np.linalg.norm(vector))
    return found


def test_two_voices_are_tagged_by_who_speaks_the_first_voice_s1():
    from tpu_demo.segmenting.diarize import diarize

    # bob speaks first; a short laugh right after his second turn; a third voice once
    found = voices((0, 2, 1), (3, 5, 0), (6, 8, 1), (8.2, 8.8, 2), (9, 11, 0), (12, 14, 2), (15, 17, 1), (18, 20, 0))
    assert diarize(found) == 2
    assert [piece.turn for piece in found] == ["[S1]", "[S2]", "[S1]", "[S1]", "[S2]", None, "[S1]", "[S2]"]
    assert found[5].dropped == "uncertain voice" and found[5].detail.startswith("neither voice of its recording")


def test_the_first_voice_heard_is_s1_where_its_first_turn_was_dropped():
    # bob's first turn dropped as band-limited: alice's, heard second, was [S1] in every clip (the two swapped)
    from tpu_demo.segmenting.diarize import diarize

    found = voices((0, 2, 1), (3, 5, 0), (6, 8, 1), (9, 11, 0), (12, 14, 1), (15, 17, 0))
    found[0].dropped = "band-limited"
    assert diarize(found) == 2
    assert [piece.turn for piece in found[1:]] == ["[S2]", "[S1]", "[S2]", "[S1]", "[S2]"]


def test_one_voice_is_all_s1_and_an_odd_piece_is_left_to_the_voice_check():
    from tpu_demo.segmenting.diarize import diarize

    found = voices((0, 2, 0), (3, 5, 0), (6, 8, 1), (9, 11, 0), (12, 14, 0))  # one sentence by someone else
    assert diarize(found) == 1
    assert {piece.turn for piece in found} == {"[S1]"} and not any(piece.dropped for piece in found)


def test_one_voice_with_a_second_voice_over_some_pieces_is_one_voice_not_a_dialogue():
    from tpu_demo.segmenting.diarize import diarize

    found = voices((0, 2, 0), (3, 5, 0), (6, 8, 0), (9, 11, 0), (12, 14, 0), (15, 17, 0))
    for piece in found[1::2]:  # another voice over these, as loud: their voice moves, about 0.85 from the speaker's
        mixed = np.asarray(piece.voice) + 0.6 * np.eye(16)[1]
        piece.voice = list(mixed / np.linalg.norm(mixed))
    assert diarize(found) == 1 and {piece.turn for piece in found} == {"[S1]"}  # the voice check judges them


def test_a_clip_of_a_dialogue_holds_whole_turns():
    from tpu_demo.segmenting.join import join

    found = pieces((0, 1.5), (1.8, 3.0), (3.3, 4.5), (4.8, 6.0))
    for piece, text in zip(found, ["[S1] One two.", "[S2] Three.", "[S2] Four five.", "[S1] Six."], strict=True):
        piece.text = text
    clips = join(found, recording(), 7.0, recordings_settings(max_clip_seconds=4.0, min_clip_seconds=0.5))
    # the 4 s limit falls inside S2's turn: it starts the next clip instead of being cut in two
    assert [clip.text for clip in clips] == ["[S1] One two.", "[S2] Three. Four five.", "[S1] Six."]


@pytest.mark.xdist_group("segment")
def test_a_dialogue_is_kept_with_its_turns_tagged_with_and_without_its_transcript(tmp_path):
    truth, report, scores = segment_planted(planted_speech.write_dialogues, tmp_path)
    for name, row in scores.items():
        assert row["good_kept"] >= 0.95 * row["good_seconds"] and row["cuts_inside"] == 0, (name, row)
    assert scores["talks/with-text"]["wrong_text"] == 0  # the other's text is the recogniser's, unchecked
    assert planted_speech.tag_errors(truth, report) == {"talks/with-text": 0, "talks/no-text": 0}
    assert report["voices"] == {"talks/with-text": 2, "talks/no-text": 2}
    texts = " ".join(clip["text"] for clip in report["clips"] if clip["recording"] == "talks/with-text")
    assert "thank you. (laughs) [S1] No problem at all," in texts  # the laugh's tag stays where it is said


def test_turns_without_pauses_are_told_by_the_voices_windows():
    # quick turns (60-250 ms apart) left in one piece each: the pieces' voices were one cluster, "one voice", and every
    # clip [S1]; a piece of two voices is dropped, not given one voice's tag
    from tpu_demo.segmenting.diarize import diarize

    rng = np.random.default_rng(1)

    def unit(axis):
        vector = np.zeros(16)
        vector[axis] = 1.0
        vector += 0.05 * rng.standard_normal(16)
        return vector / np.linalg.norm(vector)

    turns = [[0, 1, 0], [1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 0, 0], [1, 1, 1]]  # the voice of each 1.6 s window
    found = pieces(*[(5.0 * number, 5.0 * number + 4.0) for number in range(len(turns))])
    for piece, axes in zip(found, turns, strict=True):
        piece.voice_windows = [list(unit(axis)) for axis in axes]
        mean = np.mean(piece.voice_windows, axis=0)
        piece.voice = list(mean / np.linalg.norm(mean))
    assert diarize(found) == 2
    assert [piece.dropped for piece in found] == ["uncertain voice"] * 4 + [None, None]
    assert found[0].detail == "two voices in one piece: its 1.6 s windows are of [S1] and [S2]"
    assert [piece.turn for piece in found[4:]] == ["[S1]", "[S2]"]


def alike_voices(order: list[int], alike: float, seed: int = 2):
    """Pieces of 4 s, four 1.6 s windows each, of the voices in `order`: two voices `alike` similar (flite's awb and
    rms are 0.73-0.82 alike in GE2E), each window its voice plus noise (about 0.95 like it)."""
    rng = np.random.default_rng(seed)
    axes = [np.eye(32)[0], alike * np.eye(32)[0] + np.sqrt(1 - alike**2) * np.eye(32)[1]]
    found = pieces(*[(5.0 * number, 5.0 * number + 4.0) for number in range(len(order))])
    for piece, voice in zip(found, order, strict=True):
        windows = [axes[voice] + 0.05 * rng.standard_normal(32) for _ in range(4)]
        piece.voice_windows = [list(window / np.linalg.norm(window)) for window in windows]
        mean = np.mean(piece.voice_windows, axis=0)
        piece.voice = list(mean / np.linalg.norm(mean))
    return found


def test_two_alike_voices_are_told_apart_relative_to_each_other():
    # two men 0.82 alike: over the fixed 0.75 of one voice, the dialogue was "one voice" and every clip [S1]
    from tpu_demo.segmenting.diarize import diarize

    order = [1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1]
    found = alike_voices(order, 0.82)
    assert diarize(found) == 2
    assert [piece.turn for piece in found] == [["[S2]", "[S1]"][voice] for voice in order]  # voice 1 heard first
    alone = alike_voices([0] * 12, 0.82)
    assert diarize(alone) == 1 and {piece.turn for piece in alone} == {"[S1]"}


def test_where_spectral_clustering_hears_one_voice_the_windows_are_still_asked(monkeypatch):
    # flite slt and rms with turns 60-300 ms apart: the clusterer, smoothing over neighbouring windows, heard one
    # voice, and all 3 kept clips were [S1] over both; the windows' own clustering hears two
    from tpu_demo.segmenting import diarize as stage

    monkeypatch.setattr(stage, "spectral_voices", lambda pieces: np.zeros((1, 16)))
    rng = np.random.default_rng(4)
    turns = [[0] * 4, [1] * 4, [0, 0, 1, 1], [1] * 4, [0] * 4, [1] * 4, [0] * 4, [1] * 4, [0] * 4]
    found = pieces(*[(5.0 * number, 5.0 * number + 4.5) for number in range(len(turns))])
    for piece, axes in zip(found, turns, strict=True):
        windows = [np.eye(16)[axis] + 0.05 * rng.standard_normal(16) for axis in axes]
        piece.voice_windows = [list(window / np.linalg.norm(window)) for window in windows]
        mean = np.mean(piece.voice_windows, axis=0)
        piece.voice = list(mean / np.linalg.norm(mean))
    assert stage.diarize(found) == 2
    assert found[2].dropped == "uncertain voice" and found[2].detail.startswith("two voices in one piece")
    assert [piece.turn for piece in found] == ["[S1]", "[S2]", None, "[S2]", "[S1]", "[S2]", "[S1]", "[S2]", "[S1]"]


@pytest.mark.xdist_group("segment")
def test_turns_a_fraction_of_a_second_apart_are_cut_apart_and_tagged(tmp_path):
    # turns 80-200 ms apart left both voices in each piece: every piece was dropped as `uncertain voice`
    truth, report, scores = segment_planted(planted_speech.write_quick_turns, tmp_path)
    row = scores["talks/quick"]
    assert report["voices"] == {"talks/quick": 2}
    assert planted_speech.tag_errors(truth, report) == {"talks/quick": 0}
    assert row["good_kept"] >= 0.8 * row["good_seconds"] and row["cuts_inside"] == 0, row


def test_quick_turns_with_their_transcript_are_aligned_with_their_tags(tmp_path):
    # turns 80-200 ms apart are one stretch of speech: Silero cut it at 15 s inside a word, and a part of at most 4
    # units was tried for each piece, so no text aligned and nothing was kept
    truth, report, scores = segment_planted(
        functools.partial(planted_speech.write_quick_turns, with_text=True), tmp_path
    )
    row = scores["talks/quick"]
    assert row["wrong_text"] == 0 and planted_speech.tag_errors(truth, report) == {"talks/quick": 0}
    assert row["good_kept"] >= 0.9 * row["good_seconds"] and row["cuts_inside"] == 0, row


def test_a_greeting_just_before_the_other_voices_turn_is_the_first_voice_and_its_own_turn(tmp_path):
    # "Hi there!" 120 ms before the other voice's sentence: one piece, whose windows are mostly the other voice's; it
    # was tagged with it, and that voice was [S1] in every clip (all swapped)
    truth, report, scores = segment_planted(planted_speech.write_greeting_first, tmp_path)
    assert report["voices"] == {"talks/greeting": 2}
    assert planted_speech.tag_errors(truth, report) == {"talks/greeting": 0}
    first = min((clip for clip in report["clips"] if not clip["dropped"]), key=lambda clip: clip["start"])
    assert first["start"] < truth["talks/greeting"]["sentences"][0]["end"]  # the greeting kept, in its first clip
    assert first["text"].startswith("[S1] ") and "[S2]" in first["text"], first["text"]


def test_a_quick_reply_inside_the_other_voices_piece_is_its_own_turn(tmp_path):
    # "Yes." 0.1 s after alice's sentence, alice going on 0.12 s later: one piece whose windows are alice's; the
    # reply was tagged [S1] with her
    truth, report, scores = segment_planted(planted_speech.write_quick_replies, tmp_path)
    assert report["voices"] == {"talks/replies": 2}
    assert planted_speech.tag_errors(truth, report) == {"talks/replies": 0}
    # most is kept; some of alice's sentences, parted from her replies' pieces, fall under her turn's voice check
    assert scores["talks/replies"]["good_kept"] >= 0.5 * scores["talks/replies"]["good_seconds"]


def test_a_piece_is_cut_where_its_windows_change_voice_at_a_gap_and_not_without_one():
    from tpu_demo.segmenting.turns import cut_at_turns, gap_in, turn_cuts

    rng = np.random.default_rng(5)
    speech = (0.3 * np.sin(np.arange(16000 * 6) / 16000 * 2 * np.pi * 180) * (1 + rng.random(16000 * 6))).astype(
        np.float32
    )
    speech[int(2.3 * 16000) : int(2.42 * 16000)] = 0.0  # a turn 120 ms after the last
    found = alike_voices([0, 1, 0, 1, 0, 1, 0, 1], 0.3)  # pieces of 4 windows, 5 s apart: one voice each
    found[0].end, found[0].voice_windows = 6.0, found[0].voice_windows[:2] + found[1].voice_windows[2:]
    assert gap_in(speech, found[0], 1.57, 2.34) == 2.36
    assert gap_in(np.abs(speech) + 0.3, found[0], 1.57, 2.34) is None  # no gap: the voices overlap, not cut
    cuts = turn_cuts(found, speech)
    assert cuts == {"0.000-6.000": [2.36]}
    found[0].snr_db = 31.0
    parts = cut_at_turns(found, cuts)
    assert [(part.start, part.end) for part in parts[:2]] == [(0.0, 2.36), (2.36, 6.0)]
    assert parts[1].snr_db == 31.0 and parts[1].voice == [] and parts[2] is found[1]


def test_a_turn_is_cut_at_the_gap_where_the_voices_part_not_at_a_longer_pause_inside_the_next_turn():
    # "...all day." 70 ms before "Thanks, I will bring it back tonight.": the comma's 0.2 s pause was the longest
    # quiet stretch, and "Thanks," went with the other voice's turn
    from tpu_demo.segmenting.turns import gap_in

    rate, tones = 16000, {"bob": 150.0, "alice": 300.0}

    def tone(who: str, seconds: float) -> np.ndarray:
        return 0.3 * np.sin(np.arange(int(seconds * rate)) / rate * 2 * np.pi * tones[who]).astype(np.float32)

    def encoder(audio: np.ndarray) -> tuple[list[float], list]:  # a voice: the share of each speaker's tone
        spectrum, frequencies = np.abs(np.fft.rfft(audio)), np.fft.rfftfreq(len(audio), 1 / rate)
        voice = np.array([spectrum[np.abs(frequencies - hz) < 40].sum() for hz in tones.values()])
        return list(voice / np.linalg.norm(voice)), []

    def silence(seconds: float) -> np.ndarray:
        return np.zeros(int(seconds * rate), np.float32)

    speech = np.concatenate([tone("bob", 2.0), silence(0.07), tone("alice", 0.5), silence(0.2), tone("alice", 1.7)])
    piece = pieces((0.0, len(speech) / rate))[0]
    assert gap_in(speech, piece, 1.5, 3.0) == pytest.approx(2.67, abs=0.02)  # by length alone: the comma's pause
    assert gap_in(speech, piece, 1.5, 3.0, np.eye(2), encoder) == pytest.approx(2.035, abs=0.02)


@pytest.mark.xdist_group("segment")
def test_two_alike_voices_the_eigengap_hears_as_one_are_two_and_one_voice_stays_one(tmp_path):
    # espeak-ng's en+m1 and en+m2: spectral clustering's eigengap heard one voice, and every clip was [S1]
    truth, report, _ = segment_planted(planted_speech.write_alike_voices, tmp_path)
    assert report["voices"] == {"talks/alike": 2, "talks/alone": 1}
    assert planted_speech.tag_errors(truth, report)["talks/alike"] == 0
    kept = [clip for clip in report["clips"] if not clip.get("dropped")]
    assert sum(clip["recording"] == "talks/alike" for clip in kept) >= 3
    assert not any("[S2]" in clip["text"] for clip in kept if clip["recording"] == "talks/alone")


def test_a_one_voice_recording_split_in_two_stays_one_voice():
    # the halves of one voice's windows are alike and hardly apart: split_in_two keeps them one voice
    from tpu_demo.segmenting.diarize import split_in_two

    alone = alike_voices([0] * 12, 0.82)
    assert len(split_in_two(alone)) == 0
    two = alike_voices([1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1], 0.82)
    assert len(split_in_two(two)) == 2


def spoken_pieces(voices: list[str]) -> list:
    """One piece per sentence said by each voice in turn (espeak-ng), with its GE2E voice and windows as the measure
    stage gives them."""
    from tests.planted_faults import SENTENCES, talk
    from tpu_demo.segmenting.measure import VoiceEncoder
    from tpu_demo.segmenting.read import levelled

    samples, sentences = talk(list(SENTENCES[: len(voices)]), voices, 16000, seed=3)
    encoder, found = VoiceEncoder(), pieces(*[(sentence.start, sentence.end) for sentence in sentences])
    for piece in found:
        said = samples[int(piece.start * 16000) : int(piece.end * 16000)]
        piece.voice, piece.voice_windows = encoder(levelled(said))
    return found


@pytest.mark.xdist_group("segment")
def test_a_dialogue_too_short_to_count_its_voices_by_the_eigengap_is_split_in_two_and_one_voice_stays_one():
    # 20 s of two alike espeak-ng women: under the 30 windows spectral clustering counts voices on, every clip was
    # [S1]; their windows split in two are apart as two voices are, one voice's halves are not
    from tpu_demo.segmenting.diarize import SPECTRAL_WINDOWS, diarize

    needs_speech_models()
    two = spoken_pieces(["en-us+f2", "en-us+f4"] * 3)
    assert sum(len(piece.voice_windows) for piece in two) < SPECTRAL_WINDOWS
    assert diarize(two) == 2 and [piece.turn for piece in two] == ["[S1]", "[S2]"] * 3
    one = spoken_pieces(["en-us+f2"] * 6)
    assert diarize(one) == 1 and {piece.turn for piece in one} == {"[S1]"}
