"""Every kept clip's text is what is said in it: a recording's own text, split over its pieces through the
recogniser's transcripts, is aligned to each piece's audio (pocketsphinx's forced alignment,
tpu_demo.segmenting.align.Aligner), and a piece whose alignment is uncertain is dropped rather than kept with
guessed text; the report gives each clip's alignment confidence."""

import re
from collections import Counter

import numpy as np
import pytest

from tests import planted_faults, planted_speech
from tests.finetune.test_segmenting import needs_speech_models, pieces, recording, segmented, settings
from tests.testing_utils import require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia


def test_each_piece_gets_the_part_of_the_text_that_aligns_and_one_that_aligns_none_is_dropped():
    from tpu_demo.evaluation.intelligibility import normalise
    from tpu_demo.segmenting.align import align_text

    # said: "one two", "nine ten" (not in the script), "three four", "five six"; the script holds a sentence never
    # said, and a turn
    said = ["one two", "nine ten", "three four", "five six"]
    found = pieces((0, 1), (2, 3), (4, 5), (6, 7))
    tried = []

    def align_piece(piece, text):  # a stand-in aligner: a text aligns with the words said in the piece only
        tried.append((piece.start, text))
        right = normalise(text) == said[int(piece.start) // 2]
        return {
            "confidence": 0.95 if right else 0.0,
            "problem": None if right else "the text does not align",
            "fit": 0.0 if right else None,
        }

    align_text(found, recording("[S1] One two. [S2] Never said, at all. Three four. Five six."), align_piece)
    assert [(piece.text, piece.dropped, piece.alignment) for piece in found] == [
        ("[S1] One two.", None, 0.95),
        ("", "uncertain alignment", 0.0),
        ("[S2] Three four.", None, 0.95),
        ("[S2] Five six.", None, 0.95),
    ]
    assert found[1].detail == (
        "no part of its recording's text aligns: the text does not align (alignment confidence 0.00)"
    )
    from tpu_demo.segmenting.align import LENGTH_TRIES, SEARCH_TRIES

    assert max(Counter(start for start, _ in tried).values()) <= SEARCH_TRIES + LENGTH_TRIES  # parts a piece


def test_a_fast_speakers_first_piece_is_sized_by_the_recordings_own_pace():
    # three sentences said at 320 words a minute, cut as one 4.5 s piece: a fixed first guess at the pace (0.075 s a
    # character) took it for 60 characters, and the whole text (128) was not among the parts tried
    from tpu_demo.segmenting.align import align_text

    text = (
        "The train to the city leaves at half past seven. If you miss it, there is another one an hour later. "
        "Remember to buy your ticket at the station before you board."
    )
    found = pieces((0.3, 4.8))

    def align_piece(piece, part):  # a stand-in aligner: only the whole text is said in the piece
        right = part == f"[S1] {text}"
        return {
            "confidence": 1.0 if right else 0.0,
            "problem": None if right else "the text does not align",
            "fit": 0.0 if right else None,
        }

    align_text(found, recording(f"[S1] {text}"), align_piece)
    assert (found[0].text, found[0].dropped) == (f"[S1] {text}", None)


def test_each_piece_is_aligned_with_the_margins_its_clip_gets(tmp_path):
    # the speech detector cut a piece inside its last word ("cold"): aligned without the pause its clip keeps, the
    # word aligned nowhere and a clean sentence was dropped as `uncertain alignment`
    from tpu_demo.segmenting.join import join
    from tpu_demo.segmenting.read import Recording
    from tpu_demo.segmenting.run import align_recording
    from tpu_demo.segmenting.stages import Stages

    path = tmp_path / "talk.wav"
    soundfile.write(path, np.zeros(7 * 16000, np.float32), 16000)
    found = pieces((1.0, 2.0), (2.1, 3.0), (5.0, 6.9))
    heard = []

    class Models:
        def get(self, name):
            def aligner(audio, rate, text):  # the shortest part fits best
                heard.append(round(len(audio) / rate, 2))
                return {"confidence": 1.0, "problem": None, "fit": -float(len(text))}

            return aligner

    talk = Recording(path, "talk", None, "The morning was cold. We walked. " * 3)
    align_recording(talk, found, Stages(talk, tmp_path / "out", settings(), "pocketsphinx"), Models())
    clips = join(found, talk, 7.0, settings(max_clip_seconds=1.5))
    assert list(dict.fromkeys(heard)) == [round(clip.end - clip.start, 2) for clip in clips] == [1.2, 1.1, 2.1]


def test_the_aligner_tells_the_words_said_from_others():
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    first, second = planted_faults.SENTENCES[:2]
    audio = planted_faults.speak(first, planted_faults.VOICES["alice"], 16000)
    align = Aligner(0.4)
    words = first.lower().strip(".").split()
    right = align(audio, 16000, " ".join(words))
    assert right["problem"] is None and right["confidence"] > 0.9, right
    lacking = align(audio, 16000, " ".join(words[:-3]))  # its last three words said, not written
    assert lacking["problem"].startswith("speech the text lacks") and lacking["confidence"] < 0.9, lacking
    other = align(audio, 16000, " ".join(second.lower().strip(".").split()))
    assert other["problem"] and other["confidence"] == 0.0, other
    # a word the dictionary lacks is pronounced by gruut's grapheme-to-phoneme model, and found not said here
    assert align(audio, 16000, "the zqxjv lights")["problem"].startswith("speech the text lacks")
    assert align(audio, 16000, "the x² lights")["problem"] == "not in the aligner's dictionary: x²"  # no reading


def test_a_sentence_said_to_its_end_aligns_to_its_last_word():
    # pocketsphinx's lattice pass (bestpath) ended these alignments before their last word, which then aligned
    # nowhere: clean sentences, in their clips' margins, were dropped as `uncertain alignment`
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin = Aligner(0.4), np.zeros(2400, np.float32)
    for voice, sentence in (("en+m3", 8), ("en-gb+f2", 8), ("en-us+m7", 19)):
        said = planted_faults.speak(planted_faults.SENTENCES[sentence], voice, 16000)
        audio = np.concatenate([margin, 0.5 * said / np.abs(said).max(), margin])
        audio += 1e-3 * np.random.default_rng(0).standard_normal(len(audio)).astype(np.float32)  # a room's noise
        words = planted_faults.SENTENCES[sentence].lower().strip(".").split()
        found = align(audio, 16000, " ".join(words))
        assert found["problem"] is None and found["confidence"] > 0.9, (voice, sentence, found)


def test_fast_speech_aligns_and_its_missing_words_are_still_found():
    # at espeak-ng's 320 words a minute pocketsphinx's 10 ms frames left 3-state phones too few frames: sentences
    # said right did not align, or lost words, and were dropped as `uncertain alignment`
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align = Aligner(0.4)
    for sentence in planted_faults.SENTENCES[:6]:
        audio = planted_faults.speak(sentence, planted_faults.VOICES["alice"], 16000, words_per_minute=320)
        words = sentence.lower().strip(".").replace(",", "").split()
        right = align(audio, 16000, " ".join(words))
        assert right["problem"] is None and right["confidence"] > 0.9, (sentence, right)
        assert align(audio, 16000, " ".join(words[:-3]))["problem"], sentence  # its last three words not written


def gated(audio, rate, below_db=40.0, margin=0.15):
    """`audio` through a noise gate (10 ms frames `below_db` under its peak set to digital zero, as podcast editors
    do), with `margin` s of zeros at each end (a speech detector's)."""
    frames = audio[: len(audio) // (rate // 100) * (rate // 100)].reshape(-1, rate // 100).copy()
    frames[np.sqrt((frames**2).mean(axis=1)) < 10 ** (-below_db / 20) * np.abs(audio).max()] = 0.0
    pad = np.zeros(round(margin * rate), np.float32)
    return np.concatenate([pad, frames.reshape(-1), pad])


def test_gated_speech_and_silent_margins_align_and_a_word_said_not_written_still_does_not():
    # digital silence between words threw pocketsphinx off (a sentence aligned without its last word, or not at all)
    # and a piece's quiet margins counted as speech the text lacks: good speech was dropped as `uncertain alignment`;
    # so was a compound the dictionary lacks (SENTENCES[5]'s "windowsill")
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align = Aligner(0.4)
    for sentence in planted_faults.SENTENCES[:6]:
        audio = gated(planted_faults.speak(sentence, planted_faults.VOICES["alice"], 16000), 16000)
        words = sentence.lower().strip(".").split()
        right = align(audio, 16000, " ".join(words))
        assert right["problem"] is None and right["confidence"] > 0.9, (sentence, right)
        lacking = align(audio, 16000, " ".join(words[:-3]))  # its last three words said, not written
        assert lacking["problem"].startswith("speech the text lacks"), (sentence, lacking)


def test_an_alignment_that_leaves_out_a_word_is_uncertain():
    from tpu_demo.segmenting.align import Aligner

    class Segment:
        def __init__(self, word, start, end):
            self.word, self.start_frame, self.end_frame, self.ascore = word, start, end, 0.5

    class Decoder:  # what pocketsphinx gave on digital silence: the text's last word aligned nowhere
        def __init__(self, **_):
            pass

        def lookup_word(self, word):
            return {"the": "DH AH", "morning": "M AO R N IH NG", "was": "W AA Z", "cold": "K OW L D"}.get(word)

        def set_align_text(self, text):
            pass

        def process_raw(self, *_, **__):
            pass

        start_utt = end_utt = reinit_feat = process_raw

        def hyp(self):
            return "the morning was"

        def seg(self):
            spans = [("<s>", 0, 0), ("the", 0, 11), ("morning", 12, 62), ("was", 63, 96), ("</s>", 97, 97)]
            return [Segment(*span) for span in spans]

    align = Aligner(0.4)
    align.decoder = Decoder
    found = align(0.1 * np.ones(16000, np.float32), 16000, "the morning was cold")
    assert found["problem"] == "'cold' aligned nowhere" and found["confidence"] < 0.95, found


@pytest.mark.xdist_group("segment")
def test_each_kept_clip_carries_the_words_said_in_it_when_the_script_differs(tmp_path):
    # with a script lacking a sentence and holding one never said, words shifted across clip edges and kept clips
    # carried other sentences' words
    needs_speech_models()
    truth = planted_faults.write_script_faults(tmp_path / "recordings")
    report = segmented(tmp_path / "recordings", tmp_path / "out")
    (row,) = planted_faults.score(truth, report)
    assert row["wrong_text"] == 0, [(c["text"], c["start"], c["end"]) for c in report["clips"] if not c["dropped"]]
    assert row["good_kept"] > 0.4 * row["good_seconds"], row  # what aligns is kept
    kept = [clip for clip in report["clips"] if not clip["dropped"]]
    assert kept and all(0.5 < clip["alignment"] <= 1.0 for clip in kept)


def test_pace_is_judged_per_speaker():
    # a global median: a threshold changed for one speaker flipped clean clips of another
    from tpu_demo.segmenting.join import Clip
    from tpu_demo.segmenting.judge import drop_unusual_pace

    fast = [Clip("anna/a", 0, seconds, "anna", text="abcdefghij") for seconds in (0.5, 0.55, 0.45, 0.5)]
    slow = [Clip("ben/b", 0, seconds, "ben", text="abcdefghij") for seconds in (1.5, 1.4, 1.6, 4.0)]
    drop_unusual_pace(fast + slow, tolerance=2.0)
    assert [clip.dropped for clip in fast + slow] == [None] * 7 + ["unusual pace"]


def test_the_summary_names_kept_clips_whose_noise_could_not_be_measured(tmp_path):
    # a recording trimmed to its speech has no pause to measure noise in: at 10 dB SNR it was kept (or dropped for
    # another reason) and nothing said that its SNR was never judged
    from tpu_demo.segmenting.join import Clip
    from tpu_demo.segmenting.write import report_lines, summarise

    clips = [Clip("a", 0, 2.0, snr_db=31.0), Clip("b", 0, 4.5), Clip("c", 0, 3.0, dropped="noisy")]
    summary = summarise(clips, 3) | {"corrections": {"applied": 0, "unmatched": 0}}
    assert summary["unmeasured_snr"] == {"clips": 1, "seconds": 4.5}
    assert (
        "1 kept clips (4.5 s) have no SNR: their recordings hold no pause of 0.3 s to measure the noise in (a file "
        "trimmed to its speech), so only DNSMOS judged their noise: listen to them, or keep the recordings' pauses"
    ) in report_lines(summary, tmp_path)
    measured = summarise(clips[:1], 1) | {"corrections": {"applied": 0, "unmatched": 0}}
    assert not any("have no SNR" in line for line in report_lines(measured, tmp_path))


def test_the_summary_names_a_recording_that_kept_under_half_its_speech(tmp_path):
    # a new user's recording lost all 3 pieces to `uncertain alignment`; the summary said "kept 17 clips" and no
    # line named it
    from tpu_demo.segmenting.join import Clip
    from tpu_demo.segmenting.write import report_lines, summarise

    clips = [Clip("library", 0, 8.0, dropped="uncertain alignment"), Clip("library", 8, 16.0, dropped="noisy"),
             Clip("library", 16, 18.0), Clip("canal", 0, 4.0), Clip("canal", 4, 6.0, dropped="noisy")]  # fmt: skip
    summary = summarise(clips, 2) | {"corrections": {"applied": 0, "unmatched": 0}}
    assert (
        "recordings that kept under half their speech: library 2.0 of 18.0 s (uncertain alignment 1, noisy 1): see "
        f"why on {tmp_path / 'segment_report.html'}"
    ) in report_lines(summary, tmp_path)
    assert list(summary["mostly_dropped"]) == ["library"]


def test_the_summary_says_which_texts_were_aligned_and_which_are_unchecked_transcripts(tmp_path):
    from tpu_demo.segmenting.join import Clip
    from tpu_demo.segmenting.write import report_lines, summarise

    clips = [Clip("a", 0, 2.0, alignment=0.93), Clip("a", 3, 5.0, alignment=0.81), Clip("b", 0, 3.5),
             Clip("b", 4, 6.0, corrected=True), Clip("b", 7, 9.0, dropped="noisy")]  # fmt: skip
    summary = summarise(clips, 2) | {"corrections": {"applied": 1, "unmatched": 0}}
    assert summary["aligned"] == {"clips": 2, "least_confidence": 0.81}
    assert summary["unchecked"] == {"clips": 1, "seconds": 3.5}
    lines = report_lines(summary, tmp_path)
    assert "texts aligned to their audio: 2 clips, the least alignment confidence 0.81" in lines
    assert (
        "1 kept clips (3.5 s) carry the recogniser's transcript, unchecked (no NAME.txt beside their recordings): "
        "proofread them in metadata.csv, or give the recordings their text, which is aligned"
    ) in lines


def fitting(by_piece: list[dict[str, float]]):
    """A stand-in aligner for pieces 3 s apart: the parts in the piece's dict align to it (with that fit), any
    other does not."""
    from tpu_demo.evaluation.intelligibility import normalise

    def align_piece(piece, text):
        fit = {normalise(part): fit for part, fit in by_piece[round(piece.start / 3.0)].items()}.get(normalise(text))
        return {"confidence": 1.0, "problem": None if fit is not None else "the text does not align", "fit": fit}

    return align_piece


def test_a_part_that_fits_worse_than_the_recordings_other_texts_is_not_taken():
    # forced alignment accepts any text of about the right length: a piece whose own sentence is missing from the
    # script aligned to the next one (at confidence 1.00), and every piece after it took the wrong sentence
    from tpu_demo.segmenting.align import FIT_BAND, align_text

    script = [f"Sentence {name} is said here." for name in "ABCDEFG"]
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(7)])
    fits = [{text: -0.3} for text in script]
    fits[3] = {script[3]: -0.3 - FIT_BAND - 0.4}  # D's piece said something else, of D's length
    align_text(found, recording("[S1] " + " ".join(script)), fitting(fits))
    assert [piece.dropped for piece in found] == [None] * 3 + ["uncertain alignment"] + [None] * 3
    worse = f"fits the audio worse than the recording's others ({-0.3 - FIT_BAND - 0.4:.2f} against -0.30 a frame)"
    assert worse in found[3].detail
    assert [piece.text for piece in found if not piece.dropped] == [
        f"[S1] {text}" for text in script if "D" not in text
    ]
    assert 0.5 <= min(piece.alignment for piece in found if not piece.dropped) and found[3].alignment < 0.5


def test_a_taken_part_whose_text_is_not_all_that_is_said_drops_its_piece_and_an_accent_does_not():
    # the part was the piece's (the search stays in step), but a filler or a word said otherwise makes its text wrong;
    # a word said otherwise the same way in many pieces is the speaker's ("Derby" as "darby" in 12 of 104 pieces)
    from tpu_demo.evaluation.intelligibility import normalise
    from tpu_demo.segmenting.align import ACCENT_PIECES, align_text

    script = [f"Sentence {name} is said in Derby." for name in "ABCDEFG"]
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(7)])
    align_piece = fitting([{text: -0.3} for text in script])
    said = {script[1]: ("speech the text lacks ('um' heard for 0.30 s at 1.00 s)", None)}
    said |= {text: ("'derby' said otherwise (-0.15 under the phones heard)", "derby") for text in script[3:6]}

    def aligned(piece, text):
        otherwise = next((found for part, found in said.items() if normalise(part) == normalise(text)), (None, None))
        return align_piece(piece, text) | dict(zip(("otherwise", "otherwise_word"), otherwise, strict=True))

    align_text(found, recording("[S1] " + " ".join(script)), aligned)
    assert [piece.dropped for piece in found] == [None, "uncertain alignment"] + [None] * 5
    assert "leaves out or names otherwise what is said: speech the text lacks ('um'" in found[1].detail
    assert [piece.text for piece in found[2:]] == [f"[S1] {text}" for text in script[2:]]  # still in step
    assert ACCENT_PIECES == 3
    said = {script[3]: said[script[3]]}  # in one piece only: another word
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(7)])
    align_text(found, recording("[S1] " + " ".join(script)), aligned)
    assert [piece.dropped for piece in found] == [None] * 3 + ["uncertain alignment"] + [None] * 3


def test_a_teen_before_a_sound_its_n_runs_into_heard_as_its_ty_is_dropped_unless_most_are_heard_so():
    # "We bought fourteen apples" said "forty apples" was kept: before a vowel the "n" is as short as none, and the
    # grammar heard right "-teen"s there as "-ty" on some voices (espeak-ng en-us+f3: 23 of 28), on others almost
    # never (flite slt: 0 of 28): judged where under half of a voice's 4 or more are heard so
    from tpu_demo.evaluation.intelligibility import normalise
    from tpu_demo.segmenting.align import RUNS_ON_EVIDENCE, RUNS_ON_SHARE, align_text

    script = [f"Sentence {name} holds fourteen apples." for name in "ABCDEFG"]

    def segmented(heard_ty: set[int], script=script, text=None, dropped=(), word="fourteen"):
        align_piece = fitting([{part: -0.3} for part in script])

        def aligned(piece, part):
            heard = next((number for number, said in enumerate(script) if normalise(said) == normalise(part)), None)
            return align_piece(piece, part) | {"runs_on": [[word, "forty" if heard in heard_ty else None]]}

        found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(len(script))])
        for number in dropped:  # dropped before (noisy): its text is not known to be what is said
            found[number].dropped = "noisy"
        align_text(found, recording(text or "[S1] " + " ".join(script)), aligned)
        return found

    found = segmented({2})
    assert [piece.dropped for piece in found] == [None, None, "uncertain alignment"] + [None] * 4
    assert "'fourteen' said as 'forty'" in found[2].detail
    assert [piece.text for piece in found[3:]] == [f"[S1] {text}" for text in script[3:]]  # still in step
    assert [piece.dropped for piece in segmented({0, 2, 4, 6})] == [None] * 7  # 4 of 7: the voice's way
    assert (RUNS_ON_SHARE, RUNS_ON_EVIDENCE) == (0.5, 4)
    assert [piece.dropped for piece in segmented({0}, script[:3])] == [None] * 3  # 3 do not tell ("14 Elm St.")
    assert [piece.dropped for piece in segmented({0, 2, 4})].count("uncertain alignment") == 3  # 3 of 7: said so
    dialogue = [f"[S{1 + number % 2}] {text}" for number, text in enumerate(script + ["So it holds fourteen apples."])]
    found = segmented({0, 2, 4, 7}, dialogue, " ".join(dialogue))  # [S1]'s way (3 of 4), not [S2]'s (1 of 4)
    assert [piece.dropped for piece in found] == [None] * 7 + ["uncertain alignment"]
    found = segmented({0, 2, 4, 6}, dropped={0, 4})  # of the pieces that stand, 2 of 5
    drops = ["noisy", None, "uncertain alignment", None, "noisy", None, "uncertain alignment"]
    assert [piece.dropped for piece in found] == drops
    written = [f"Sentence {name} holds 1914 apples." for name in "ABCDEFG"]
    found = segmented({1}, written, word="n1914")  # named as the text writes it
    assert found[1].dropped == "uncertain alignment" and "'1914' said as 'forty'" in found[1].detail


def test_a_part_that_another_part_fits_almost_as_well_is_not_taken():
    # two sentences of one form a word apart: the first that aligned was taken, right or not
    from tpu_demo.segmenting.align import FIT_MARGIN, align_text

    script = ["Item 42 is a red lamp.", "Item 42 is a red lamp.", "Item 7 is a blue valve."]
    found = pieces((0.0, 2.0), (3.0, 5.0))
    fits = [{script[0]: -0.2}, {script[0]: -0.2, script[2]: -0.2 - FIT_MARGIN / 2}]  # item 42, or item 7?
    align_text(found, recording("[S1] " + " ".join(script)), fitting(fits))
    assert found[0].dropped is None and found[0].text == "[S1] Item 42 is a red lamp."
    assert found[1].dropped == "uncertain alignment", found[1].text
    assert "another part of the text fits it almost as well" in found[1].detail


@pytest.mark.parametrize("voice", ["en-us", "en-gb-x-gbcwmd", "en-sc", "flite:slt"])
def test_the_sentence_said_fits_better_than_a_like_one_that_aligns(voice):
    # a like sentence aligned to a piece at confidence 1.00, as well as the one said
    needs_speech_models()
    from tpu_demo.segmenting.align import FIT_MARGIN, Aligner

    try:
        said = planted_speech.like_sentences(8, seed=3)
        clips = [np.concatenate([np.zeros(4000, np.float32), planted_faults.speak(text, voice, 16000),
                                 np.zeros(4000, np.float32)]) for text in said]  # fmt: skip
    except planted_faults.NoEspeak as error:
        pytest.skip(str(error))
    align = Aligner(0.4)
    for audio, text in zip(clips, said, strict=True):
        right = align(audio, 16000, text)
        others = [align(audio, 16000, other) for other in said if other != text]
        best = max((found["fit"] for found in others if found.get("fit") is not None), default=None)
        assert best is None or right["fit"] - best >= FIT_MARGIN, (text, right, best)


def test_a_part_found_out_of_step_needs_a_clearer_fit():
    # after a piece no part was taken for, a like sentence further on aligned to the next piece (held-out: 4 clips of
    # a 21-minute list took later sentences' texts, at confidences 0.59-0.80)
    from tpu_demo.segmenting.align import FIT_BAND, align_text

    script = [f"Sentence {name} is said here." for name in "ABCDEFGHIJ"]
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(10)])
    fits = [{text: -0.3} for text in script]
    fits[5] = {}  # F's piece: nothing aligns
    fits[6] = {script[6]: -0.3 - 0.75 * FIT_BAND}  # G's, after it: within the band, not within half of it
    fits[8] = {script[8]: -0.3 - 0.75 * FIT_BAND}  # I's, in step: taken
    align_text(found, recording("[S1] " + " ".join(script)), fitting(fits))
    assert [piece.dropped for piece in found] == [None] * 5 + ["uncertain alignment"] * 2 + [None] * 3
    assert found[8].alignment >= 0.5 > found[6].alignment


def test_a_part_that_skips_text_needs_a_clearer_fit():
    # a piece whose own sentence did not align took the sentence after it (fit 0.95 under the recording's), and the
    # next piece, that sentence's, was dropped
    from tpu_demo.segmenting.align import FIT_BAND, align_text

    script = [f"Sentence {name} is said here." for name in "ABCDEFG"]
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(7)])
    fits = [{text: -0.3} for text in script]
    fits[5] = {script[6]: -0.3 - 0.75 * FIT_BAND}  # F's piece: F does not align, G (after it) does, worse
    align_text(found, recording("[S1] " + " ".join(script)), fitting(fits))
    assert [piece.dropped for piece in found] == [None] * 5 + ["uncertain alignment", None]
    assert found[6].text == f"[S1] {script[6]}"


def test_before_the_recording_has_a_typical_fit_a_part_out_of_step_is_judged_against_the_phone_loop():
    # flite slt's first sentence did not align ("the" squeezed); a sentence five on aligned to it at fit -3.09 and was
    # kept, and so were the next pieces' far parts: there was no median of taken parts yet to judge them by
    from tpu_demo.segmenting.align import FIT_BAND, align_text

    script = [f"Sentence {name} is said here." for name in "ABCDEFGHIJ"]
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(10)])
    fits = [{script[5]: -3.1}] + [{text: -0.1} for text in script[1:]]
    align_text(found, recording("[S1] " + " ".join(script)), fitting(fits))
    assert [piece.dropped for piece in found] == ["uncertain alignment"] + [None] * 9
    assert [piece.text for piece in found[1:]] == [f"[S1] {text}" for text in script[1:]]
    # within half the band of the loop, a part out of step is still taken before there is a median
    fits[0] = {script[5]: -0.4 * FIT_BAND}
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(10)])
    align_text(found, recording("[S1] " + " ".join(script)), fitting(fits))
    assert found[0].text == f"[S1] {script[5]}" and found[0].dropped is None


@pytest.mark.parametrize("recogniser", ["pocketsphinx", "openai/whisper-small"])
def test_the_summary_names_the_review_list_and_how_to_get_better_text(tmp_path, recogniser):
    from tpu_demo.segmenting.join import Clip
    from tpu_demo.segmenting.write import report_lines, summarise

    clips = [Clip("a", 0, 2.0, alignment=0.93), Clip("b", 0, 3.5, review=True), Clip("b", 4, 6.0, review=True)]
    summary = summarise(clips, 2) | {"corrections": {"applied": 0, "unmatched": 0}}
    summary["segment_settings"] = {"segment_asr_model": recogniser}
    lines = report_lines(summary, tmp_path)
    assert summary["review"] == {"clips": 2, "seconds": 5.5} and summary["unchecked"]["clips"] == 0
    assert any(line.startswith("2 clips (5.5 s) carry the recogniser's transcript, unchecked") for line in lines)
    offline = any("the offline recogniser (pocketsphinx) gets most clips' words wrong" in line for line in lines)
    assert offline == (recogniser == "pocketsphinx")
    assert any("train_on_unchecked_text: true" in line for line in lines)


@pytest.mark.parametrize("voice", ["en+m3", "flite:slt"])
def test_a_non_verbal_tag_whose_sound_is_not_in_the_audio_is_not_kept(voice):
    # "(laughs)" in a script over a piece without a laugh aligned without a problem: a fine-tune learns the tag as
    # silence
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, pause = Aligner(0.4), np.zeros(4800, np.float32)
    text = "That would help a lot, thank you. (laughs)"
    try:
        laughing = planted_faults.speak("That would help a lot, thank you. Ha ha ha ha.", voice, 16000)
        plain = planted_faults.speak("That would help a lot, thank you.", voice, 16000)
    except planted_faults.NoEspeak as error:
        pytest.skip(str(error))
    heard = align(np.concatenate([pause, laughing, pause]), 16000, text)
    assert heard["problem"] is None, heard
    unheard = align(np.concatenate([pause, plain, pause]), 16000, text)
    assert unheard["problem"] == "1 of its non-verbal sounds not heard", unheard


SAID_OTHERWISE = (  # (as written, as said): a clean transcript over a filler, a repeated word, a word read otherwise
    ("The children walked slowly along the river bank after school.",
     "The children walked, um, slowly along the river bank after school.",
     "The children walked walked slowly along the river bank after school.",
     "The children walked quickly along the river bank after school."),
    ("Please put the heavy boxes next to the garage door.",
     "Please put the heavy boxes, uh, next to the garage door.",
     "Please put the heavy heavy boxes next to the garage door.",
     "Please put the light boxes next to the garage door."),
    ("The museum opens a new exhibition about ancient maps.",
     "The museum opens, um, a new exhibition about ancient maps.",
     "The museum opens a new new exhibition about ancient maps.",
     "The museum opens a new exhibition about modern maps."),
    ("He carefully folded the letter and sealed the envelope.",
     "He carefully folded the, uh, letter and sealed the envelope.",
     "He carefully folded the the letter and sealed the envelope.",
     "He carefully folded the package and sealed the envelope."),
)  # fmt: skip


def test_a_clean_text_over_a_filler_a_repeat_or_a_word_read_otherwise_is_uncertain():
    # a clean transcript over "um", a repeated word or "quickly" for "slowly" aligned without a problem, at a fit as
    # good as the recording's: 7 of 8 such sentences of a held-out set were kept with the text that left them out.
    # Not all are caught ("uh" before "a" aligns as "a"): at least half of each, and no clean sentence
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin, caught = Aligner(0.4), np.zeros(3200, np.float32), Counter()
    for voice in ("flite:kal16", "flite:slt", "en-us+f3"):
        for written, *said in SAID_OTHERWISE:
            try:
                audios = [planted_faults.speak(text, voice, 16000) for text in (written, *said)]
            except planted_faults.NoEspeak as error:
                pytest.skip(str(error))
            audios = [np.concatenate([margin, audio, margin]) for audio in audios]
            right = align(audios[0], 16000, written)
            assert right["problem"] is None and right["otherwise"] is None, (voice, written, right)
            for kind, audio in zip(("filler", "repeat", "other word"), audios[1:], strict=True):
                found = align(audio, 16000, written)
                caught[kind] += bool(found["problem"] or found["otherwise"])
    assert caught["filler"] >= 5 and caught["repeat"] >= 5 and caught["other word"] >= 8, caught  # of 12 each


def uncertain(align, voice: str, said: str, written: str) -> bool:
    """Whether `align` finds `written` uncertain (a problem, or something said otherwise) over `voice` saying `said`
    between 0.2 s margins; the test skips where the voice is missing."""
    try:
        audio = planted_faults.speak(said, voice, 16000)
    except planted_faults.NoEspeak as error:
        pytest.skip(str(error))
    margin = np.zeros(3200, np.float32)
    found = align(np.concatenate([margin, audio, margin]), 16000, written)
    return bool(found["problem"] or found["otherwise"])


READ_OTHERWISE = (  # a sentence and a word of it read as another
    ("We are meeting at the library on Thursday afternoon.", "Thursday", "Monday"),
    ("She bought three green apples at the market.", "green", "yellow"),
    ("The train to Leeds was cancelled because of snow.", "Leeds", "Oxford"),
    ("They painted the fence a bright shade of blue.", "blue", "orange"),
    ("The doctor said the wound would heal in a week.", "doctor", "nurse"),
    ("The concert starts at eight in the evening.", "concert", "lecture"),
    ("Anna sent a letter to her cousin in Madrid.", "cousin", "teacher"),
    ("The soup needs more salt and a little pepper.", "salt", "garlic"),
    ("We walked along the river until sunset.", "river", "beach"),
    ("The new printer is faster than the old one.", "printer", "laptop"),
    ("Tom forgot his keys at the restaurant.", "keys", "wallet"),
    ("The children planted tomatoes in the spring.", "tomatoes", "flowers"),
    ("Mark the boxes with a red pen before Friday.", "red", "black"),
)  # fmt: skip


def test_a_word_read_otherwise_whose_shortfall_the_alignment_spreads_over_its_neighbours_is_said_otherwise():
    # "kitchen" read "bathroom" in a held-out reading was kept: the aligner squeezed the word and moved its
    # neighbours' edges over its sound, and no word fit far enough under the phone loop; 16 of these 39 were caught
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, flagged = Aligner(0.4), Counter()
    for voice in ("en-us+f3", "en-gb-x-rp", "flite:slt"):
        for written, word, other in READ_OTHERWISE:
            for kind, said in (("right", written), ("read otherwise", written.replace(word, other))):
                flagged[kind] += uncertain(align, voice, said, written)
    assert flagged["right"] == 0 and flagged["read otherwise"] >= 28, flagged  # of 39 each (31 measured)


SWAPPED_IN_CLASS = (  # a sentence, a word of a closed class in it, and another of the class read for it
    ("The delivery is booked for Thursday afternoon.", "Thursday", "Tuesday"),
    ("We meet every Monday at the community hall.", "Monday", "Sunday"),
    ("The exhibition closes on Saturday evening.", "Saturday", "Friday"),
    ("Her contract ends in March next year.", "March", "May"),
    ("The school trip was moved to June.", "June", "July"),
    ("The box holds seventeen silver spoons.", "seventeen", "seven"),
    ("There are 24 chairs in the hall.", "24", "twenty five"),
    ("The team scored six goals in the final.", "six", "sixteen"),
    ("Bring eight folders to the meeting room.", "eight", "nine"),
    ("Her birthday is on the fifteenth of August.", "fifteenth", "fifth"),
    ("The rent is due on the third of every month.", "third", "first"),
    ("Rack two holds twelve velvet cloaks.", "twelve", "twenty"),
    ("The train leaves at nine in the morning.", "nine", "five"),
    ("The workshop starts on Wednesday morning.", "Wednesday", "Monday"),
    ("The festival is held every September.", "September", "November"),
)


def test_a_word_of_a_closed_class_read_as_another_of_it_is_said_otherwise():
    # "Thursday" read "Tuesday", "seventeen" read "seven", "24 m" read "twenty five": the forced alignment fits any
    # weekday, month, number or ordinal about as well, and 4 such sentences of a held-out reading reached kept clips
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, flagged = Aligner(0.4), Counter()
    for voice in ("flite:kal16", "flite:slt"):
        for written, word, other in SWAPPED_IN_CLASS:
            for kind, said in (("right", written), ("swapped", written.replace(word, other))):
                flagged[kind] += uncertain(align, voice, said.replace("24", "twenty four"), written)
    assert flagged["right"] == 0 and flagged["swapped"] >= 20, flagged  # of 30 (23 measured, 11 before)


FILLED_OR_REPEATED = (  # (voice, as said): a filler or repeat the checks before FILLER_GAIN missed
    ("en-us+f3", "The train uh, to Leeds was cancelled because of snow."),
    ("en-us+f3", "Our office moved to to the third floor last spring."),
    ("en-us+f3", "He left his umbrella on the uh, bus this morning."),
    ("en-us+f3", "He left his his umbrella on the bus this morning."),
    ("en-us+f3", "The concert starts um at eight in the evening."),
    ("en-us+f3", "The soup needs uh more salt and a little pepper."),
    ("en-us+f3", "Her flight to to Paris was delayed by two hours."),
    ("en-gb-x-rp", "The soup needs um more salt and a little pepper."),
    ("en-gb-x-rp", "We walked um, along the river until sunset."),
    ("flite:slt", "The kitchen window faces the garden behind uh the house."),
    ("flite:slt", "Please bring the silver spoons to to the dining room."),
    ("flite:slt", "The doctor said the wound would uh heal in a week."),
    ("flite:slt", "The concert starts um at eight in the evening."),
    ("flite:slt", "Anna sent a letter to her her cousin in Madrid."),
    ("flite:slt", "Her Her flight to Paris was delayed by two hours."),
    ("flite:slt", "Mark the boxes with a red pen um, before Friday."),
    ("flite:slt", "The lake was frozen for most of of January."),
)


def test_a_filler_or_repeat_the_decoding_fits_much_better_with_is_speech_the_text_lacks():
    # the alignment stretched the words around "uh" or a second "to" over its sound at a fit as good as theirs: half
    # of a held-out set's fillers and repeats reached kept clips; the decoding that hears it fits better around it
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, flagged = Aligner(0.4), Counter()
    for voice, said in FILLED_OR_REPEATED:
        written = re.sub(r" (um|uh),?|\b(\w+) (?=\2\b)", "", said, flags=re.IGNORECASE)
        for kind, text in (("right", written), ("filled or repeated", said)):
            flagged[kind] += uncertain(align, voice, text, written)
    assert flagged["right"] == 0 and flagged["filled or repeated"] >= 13, flagged  # of 17, 1 caught before


def test_a_word_heard_twice_counts_only_when_heard_longer_than_a_filler():
    # a clean "copy the whole" (espeak-ng's en+m3) was heard as "copy the the whole", the second "the" for 0.13 s in
    # the alignment's pause, and its piece dropped; flite's "uh" is heard for 0.12 s
    from tpu_demo.segmenting.align import Aligner

    class Segment:
        def __init__(self, word, start, end):
            self.word, self.start_frame, self.end_frame, self.ascore = word, start, end, 1.0

    align, loud = Aligner(0.4), np.ones(100, bool)
    align.free_loop = lambda pcm, frame: np.zeros(100)  # the text fits as well as the phones heard: no word otherwise
    segments = [Segment("copy", 0, 39), Segment("<sil>", 40, 59), Segment("the", 60, 69), Segment("whole", 70, 99)]
    for heard, found in (
        (("the", 44, 56, 0.0), None),
        (("uh", 44, 55, 0.0), "speech the text lacks ('uh' heard for 0.12 s"),
    ):
        align.unwritten = lambda *_, heard=heard: [heard]
        said = align.said_otherwise(segments, ["copy", "the", "whole"], {}, b"", 0.01, loud, [])
        assert (said and said[0][: len(found)]) == found if found else said is None, (heard, said)


def test_a_stretch_of_words_under_the_phones_heard_is_said_otherwise_but_a_tags_sound_is_not():
    import math

    from tpu_demo.segmenting.align import Aligner

    class Segment:
        def __init__(self, word, start, end, per_frame):
            self.word, self.start_frame, self.end_frame = word, start, end
            self.ascore = math.exp(per_frame * (end - start + 1))

    align, loud = Aligner(0.4), np.ones(200, bool)
    align.free_loop = lambda pcm, frame: np.zeros(200)
    align.unwritten = lambda *_: []
    words = ["the", "cat", "sat", "down", "there"]
    for fall, under_word in ((-0.004, "sat"), (-0.0001, None)):
        # 0.4 s around "sat" 0.16 and 0.004 under the phones heard: the word alone is not WORD_SHORTFALL under
        segments = [Segment(word, 40 * n, 40 * n + 39, fall if word == "sat" else 0.0) for n, word in enumerate(words)]
        said = align.said_otherwise(segments, words, {}, b"", 0.01, loud, [])
        assert (said[1] if said else None) == under_word, said
        assert not said or said[0] == "'sat' said otherwise (the 0.4 s around it: 0.16 under the phones heard)"
    # a laugh where "sat" was: its tag's sound, not a word, however far under (0.24: past WORD_SHORTFALL alone)
    for fall in (-0.004, -0.006):
        segments[2] = Segment("[SPEECH]", 80, 119, fall)
        assert align.said_otherwise(segments, [*words[:2], "[SPEECH]", *words[3:]], {}, b"", 0.01, loud, []) is None


REPLY_AFTER = (  # (voice, sentence, the other voice, its reply): a turn the text gives to the next piece
    ("flite:kal16", "The children walked slowly along the river bank after school.", "flite:slt", "Deal."),
    ("flite:kal16", "She painted the kitchen wall a pale shade of green last weekend.", "en-gb-scotland", "Sure."),
    ("flite:kal16", "The old library closes at six on most weekdays.", "flite:slt", "Right."),
)


@pytest.mark.xdist_group("segment")
def test_a_reply_after_the_text_in_two_of_the_aligners_silences_is_speech_the_text_lacks():
    # the aligner put "Deal." (0.5 s) after a turn into two silences of 0.35 and 0.15 s, each under END_SILENCE, and
    # its clip was kept without it (a held-out dialogue); consecutive silences are one
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin = Aligner(0.4), np.zeros(3200, np.float32)
    for voice, sentence, other, reply in REPLY_AFTER:
        try:
            said, answer = planted_faults.speak(sentence, voice, 16000), planted_faults.speak(reply, other, 16000)
        except planted_faults.NoEspeak as error:
            pytest.skip(str(error))
        answer *= np.sqrt(np.mean(said**2) / np.mean(answer**2))
        audio = np.concatenate([margin, said, np.zeros(2400, np.float32), answer, margin])
        lacking = align(audio, 16000, sentence)
        assert "speech the text lacks" in (lacking["problem"] or ""), (sentence, reply, lacking)
        both = align(audio, 16000, f"[S1] {sentence} [S2] {reply}")
        assert both["problem"] is None and both["otherwise"] is None, (sentence, reply, both)


def test_a_reply_a_stops_closure_splits_is_one_sound_and_a_last_release_alone_is_none():
    # "Perfect." after a turn: 0.22 s of sound, a 0.11 s closure, 0.11 s more, in the silence after the text (0.33 s
    # of sound); each
    # part under END_SILENCE, the clip was kept without it (a held-out dialogue)
    from tpu_demo.segmenting.align import Aligner

    class Segment:
        def __init__(self, word, start, end):
            self.word, self.start_frame, self.end_frame = word, start, end

    align, segments = Aligner(0.4), [Segment("stock", 0, 39), Segment("<sil>", 40, 99)]
    for sounds, judged in (([(40, 59)], 0.2), ([(48, 69), (81, 91)], 0.33)):  # a release; "Per", closure, "fect"
        loud = np.zeros(100, bool)
        loud[:40] = True
        for first, last in sounds:
            loud[first : last + 1] = True
        ends, sounding, _ = align.silences(segments, loud, 0.01, 0)
        assert ends == {1: 1} and sounding[1] == pytest.approx(judged), (sounds, sounding)
        assert (sounding[1] > align.END_SILENCE) == (judged > 0.25)


@pytest.mark.parametrize("voice", ["en+m3", "flite:slt"])
def test_a_laugh_takes_one_sound_and_a_reply_after_it_is_speech_the_text_lacks(voice):
    # "(laughs)" forgave every silence's sound up to 2 s: "Right." after a laugh, in the silence after the laugh's
    # filler, was kept in the laugh's clip while the next clip got its text (a held-out dialogue)
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, pause = Aligner(0.4), np.zeros(4800, np.float32)
    try:
        laughing = planted_faults.speak("That would help a lot, thank you. Ha ha ha ha.", voice, 16000)
        reply = planted_faults.speak("Right.", "en-us+f3" if voice != "en-us+f3" else "flite:slt", 16000)
    except planted_faults.NoEspeak as error:
        pytest.skip(str(error))
    reply *= np.sqrt(np.mean(laughing**2) / np.mean(reply**2))
    audio = np.concatenate([pause, laughing, np.zeros(2400, np.float32), reply, pause])
    lacking = align(audio, 16000, "That would help a lot, thank you. (laughs)")
    assert "speech the text lacks" in (lacking["problem"] or ""), lacking
    both = align(audio, 16000, "[S1] That would help a lot, thank you. (laughs) [S2] Right.")
    assert both["problem"] is None, both


def test_a_laugh_the_last_part_ended_with_may_go_on_in_the_next_piece():
    # a pause cut a turn's closing laugh in two: its first piece took "(laughs)", the next began with the rest of the
    # laugh, which no part after the tag explains, and the search lost the pieces after it
    from tpu_demo.segmenting.align import align_text

    script = "[S2] We walked in a circle for an hour. (laughs) [S1] No. [S2] The signs were wrong. [S1] Right."
    found = pieces((0.0, 2.5), (3.0, 5.5), (6.0, 8.5))
    fits = [
        {"[S2] We walked in a circle for an hour. (laughs)": -0.3},
        {"[S2] (laughs) [S1] No. [S2] The signs were wrong.": -0.3},
        {"[S1] Right.": -0.3},
    ]
    align_text(found, recording(script), fitting(fits))
    assert [piece.dropped for piece in found] == [None] * 3, [piece.detail for piece in found]
    assert [piece.text for piece in found] == [
        "[S2] We walked in a circle for an hour. (laughs)",
        "[S2] (laughs) [S1] No. [S2] The signs were wrong.",
        "[S1] Right.",
    ]


TEEN_SENTENCES = (  # a number word said right and read as the one like it ("fifteen" as "fifty")
    ("thirteen", "thirty", "The bus leaves from stop {} every morning."),
    ("fourteen", "forty", "There were {} people waiting outside the shop."),
    ("fifteen", "fifty", "He paid {} pounds for the old bicycle."),
    ("sixteen", "sixty", "The recipe needs {} grams of butter."),
    ("seventeen", "seventy", "Our street has {} houses on the north side."),
    ("eighteen", "eighty", "The letter took {} days to arrive."),
    ("nineteen", "ninety", "Turn to page {} and read the first line."),
)


def test_a_number_word_read_as_the_one_like_it_is_said_otherwise():
    # "fifteen" read "fifty" aligned cleanly and fit the phone loop as well as the right text: 3 of 84 such sentences
    # were caught, and 4 like-sounding numbers reached kept clips of a held-out list reading
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin, flagged = Aligner(0.4), np.zeros(3200, np.float32), Counter()
    for voice in ("flite:slt", "flite:awb", "en-us+f3"):
        for teen, ty, sentence in TEEN_SENTENCES:
            for written, said in ((teen, teen), (ty, ty), (teen, ty), (ty, teen)):
                try:
                    audio = planted_faults.speak(sentence.format(said), voice, 16000)
                except planted_faults.NoEspeak as error:
                    pytest.skip(str(error))
                found = align(np.concatenate([margin, audio, margin]), 16000, sentence.format(written))
                flagged["right" if written == said else "read otherwise"] += bool(
                    found["problem"] or found["otherwise"]
                )
    assert flagged["right"] <= 2 and flagged["read otherwise"] >= 24, flagged  # of 42 each


YEARS_AND_ENDS = (  # a teen and its ty, written and said: at a sentence's end, and in a year written in digits
    ("The parcel was sent to flat {}.", ("thirteen", "thirty"), ("thirteen", "thirty")),
    ("My uncle will be {} next week.", ("seventeen", "seventy"), ("seventeen", "seventy")),
    ("The bridge over the river opened in {}.", ("1916", "1960"), ("nineteen sixteen", "nineteen sixty")),
    ("The family moved to Glasgow in {}.", ("1819", "1890"), ("eighteen nineteen", "eighteen ninety")),
    ("The first cars reached the village in {}.", ("1914", "1940"), ("nineteen fourteen", "nineteen forty")),
)


def test_a_number_read_as_the_one_like_it_at_a_sentences_end_or_in_a_year_is_said_otherwise():
    # "1918" read "nineteen eighty" and "... in room fifteen." read "fifty" were kept: a written number's reading
    # holds its words, and a last word's "n" takes the pause after it (held-out: 8 of 15 such wrong clips)
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin, flagged = Aligner(0.4), np.zeros(3200, np.float32), Counter()
    for voice in ("en-gb-x-rp", "en-us+f3", "flite:kal16"):
        for sentence, written_forms, said_forms in YEARS_AND_ENDS:
            for written, said in ((0, 0), (1, 1), (0, 1), (1, 0)):
                try:
                    audio = planted_faults.speak(sentence.format(said_forms[said]), voice, 16000)
                except planted_faults.NoEspeak as error:
                    pytest.skip(str(error))
                found = align(np.concatenate([margin, audio, margin]), 16000, sentence.format(written_forms[written]))
                flagged["right" if written == said else "read otherwise"] += bool(
                    found["problem"] or found["otherwise"]
                )
    assert flagged["right"] <= 3 and flagged["read otherwise"] >= 15, flagged  # of 30 each


def test_a_year_in_words_is_not_taken_for_its_neighbours_number():
    # "nineteen ninety" written in words: the grammar for "ninety" holds "nineteen" as its neighbour, which was
    # taken for "ninety" heard as "nineteen"
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin = Aligner(0.4), np.zeros(3200, np.float32)
    for voice in ("en-gb-x-rp", "en-us+f3", "flite:slt"):
        for text in ("The band played there in nineteen ninety.", "The mill closed in eighteen eighty for good."):
            try:
                audio = planted_faults.speak(text, voice, 16000)
            except planted_faults.NoEspeak as error:
                pytest.skip(str(error))
            found = align(np.concatenate([margin, audio, margin]), 16000, text)
            assert found["problem"] is None and found["otherwise"] is None, (voice, text, found)
            assert found["runs_on"] == [], (voice, text, found)  # a year's first part is not judged by itself


def test_a_ty_before_a_unit_is_not_taken_for_a_teen():
    # "1998" said "nineteen ninety-eight" was dropped as said "nineteen nineteen eight", a number no one says
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    try:
        audio = planted_faults.speak("The record was set in nineteen ninety-eight.", "en-us-nyc+f2", 16000)
    except planted_faults.NoEspeak as error:
        pytest.skip(str(error))
    margin = np.zeros(3200, np.float32)
    found = Aligner(0.4)(np.concatenate([margin, audio, margin]), 16000, "The record was set in 1998.")
    assert found["problem"] is None and found["otherwise"] is None, found


def test_a_teen_said_before_a_word_its_n_runs_into_is_kept():
    # espeak-ng's en-us+f3 "Room sixteen was empty": the "n" before "w" took 0.03 s, as a "-ty" leaves it, and the
    # piece was dropped as "sixteen" said "sixty"; before a vowel, a nasal or an approximant its "n" is not judged
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin = Aligner(0.4), np.zeros(3200, np.float32)
    for text in ("Room sixteen was empty.", "Thirteen lamps were lit.", "Room sixteen remained locked."):
        try:
            audio = planted_faults.speak(text, "en-us+f3", 16000)
        except planted_faults.NoEspeak as error:
            pytest.skip(str(error))
        found = align(np.concatenate([margin, audio, margin]), 16000, text)
        assert found["problem"] is None and found["otherwise"] is None, (text, found)


def test_a_teen_before_a_word_its_n_runs_into_is_recorded_with_what_the_grammar_heard():
    # "fourteen apples" read "forty apples": the grammar hears "-ty", and the recording judges it (judge_taken)
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin, heard = Aligner(0.4), np.zeros(3200, np.float32), []
    for voice in ("flite:slt", "flite:awb"):
        for written, said in (("fourteen", "fourteen"), ("fourteen", "forty"), ("sixteen", "sixty")):
            try:
                audio = planted_faults.speak(f"We bought {said} apples for the pie.", voice, 16000)
            except planted_faults.NoEspeak as error:
                pytest.skip(str(error))
            found = align(np.concatenate([margin, audio, margin]), 16000, f"We bought {written} apples for the pie.")
            assert found["problem"] is None and found["otherwise"] is None, (voice, said, found)
            heard.append(found["runs_on"])
    assert heard == [[["fourteen", None]], [["fourteen", "forty"]], [["sixteen", "sixty"]]] * 2, heard
    # a "-teen" before the next sentence's: not a year's part ("nineteen ninety"), judged
    audio = planted_faults.speak("Of the players, forty. Eighteen more came later.", "flite:slt", 16000)
    text = "Of the players, fourteen. Eighteen more came later."
    assert ["fourteen", "forty"] in align(np.concatenate([margin, audio, margin]), 16000, text)["runs_on"]


def test_a_number_next_to_a_word_a_grammar_cannot_hold_or_a_non_verbal_sound_is_checked_without_it():
    # "16 1/2": the grammar for "sixteen" held "r1/2", which pocketsphinx refused with a ValueError that stopped the
    # run; "fifteen (laughs) people": the window held the laugh and the grammar no word for it, and "fifteen",
    # said, was taken for "fifty"
    needs_speech_models()
    from tpu_demo.segmenting.align import Aligner

    align, margin = Aligner(0.4), np.zeros(3200, np.float32)
    try:
        half = planted_faults.speak("The board measured sixteen and a half inches.", "en-us+f3", 16000)
        laugh = [
            planted_faults.speak(text, "en-us+f3", 16000)
            for text in ("There were fifteen", "ha ha ha", "people here.")
        ]
    except planted_faults.NoEspeak as error:
        pytest.skip(str(error))
    found = align(np.concatenate([margin, half, margin]), 16000, "The board measured 16 1/2 inches.")
    assert found["otherwise"] is None, found
    found = align(np.concatenate([margin, *laugh, margin]), 16000, "There were fifteen (laughs) people here.")
    assert found["otherwise"] is None, found
