"""Subtitles beside a recording (NAME.srt, NAME.vtt) are its text (tpu_demo.segmenting.subtitles): their words in
order, a WebVTT voice a speaker turn, and their cues' times anchoring the alignment to where each is said."""

import pytest

from tests import planted_speech
from tests.finetune.test_segmenting import pieces, recording, segment_planted
from tests.testing_utils import require_dia

pytestmark = require_dia
webvtt = pytest.importorskip("webvtt", reason="subtitles are read by webvtt-py: pip install '.[speech]'")

VTT = """WEBVTT

00:00:00.500 --> 00:00:02.830
<v Alice>Did you <i>finish</i> the report?</v>

00:00:03.770 --> 00:00:06.990
<v Bob>Almost &amp; soon. [PAPER RUSTLING]
I need the figures.</v>

00:00:07.000 --> 00:00:08.250
<v Bob>Then lunch. (laughs)

00:00:08.500 --> 00:00:09.000
<v Alice>Fine.
"""


def test_a_webvtt_file_is_read_as_words_said_with_its_voices_as_speaker_turns(tmp_path):
    from tpu_demo.segmenting.subtitles import read_cues

    (tmp_path / "talk.vtt").write_text(VTT, encoding="utf-8")
    cues = read_cues(tmp_path / "talk.vtt")
    assert [(cue.start, cue.end, cue.text) for cue in cues] == [
        (0.5, 2.83, "[S1] Did you finish the report?"),
        (3.77, 6.99, "[S2] Almost & soon. I need the figures."),
        (7.0, 8.25, "Then lunch. (laughs)"),
        (8.5, 9.0, "[S1] Fine."),
    ]


def test_an_srt_file_is_read_and_one_that_is_no_subtitles_is_refused_by_name(tmp_path):
    from tpu_demo.errors import FineTuneError
    from tpu_demo.segmenting.subtitles import read_cues

    (tmp_path / "a.srt").write_text("1\n00:00:01,250 --> 00:00:02,000\n{\\an8}Hello\nthere.\n\n", encoding="utf-8-sig")
    assert [(cue.start, cue.end, cue.text) for cue in read_cues(tmp_path / "a.srt")] == [(1.25, 2.0, "Hello there.")]
    (tmp_path / "b.srt").write_text("not subtitles at all\n", encoding="utf-8")
    with pytest.raises(FineTuneError, match=r"b.srt: not subtitles webvtt-py can read"):
        read_cues(tmp_path / "b.srt")


def test_a_cues_time_picks_the_part_where_like_sentences_fit_alike():
    # two sentences the aligner fits equally well: without their times neither is taken (a like part fits as well)
    from tpu_demo.segmenting.align import align_text
    from tpu_demo.segmenting.subtitles import Cue

    said = ["Item 42 is a red lamp.", "Item 24 is a red lamp.", "Item 42 is a red lamp."]
    cues = [Cue(0.0, 2.0, said[0]), Cue(3.0, 5.0, said[1]), Cue(6.0, 8.0, said[2])]
    found = pieces((0.1, 1.9), (3.1, 4.9), (6.1, 7.9))

    def align_piece(piece, text):  # any of the sentences fits any piece
        return {"confidence": 1.0, "problem": None, "fit": -0.2}

    talk = recording(" ".join(cue.text for cue in cues))
    align_text(found, talk, align_piece)
    assert found[1].dropped == "uncertain alignment"  # 24 or 42?
    found = pieces((0.1, 1.9), (3.1, 4.9), (6.1, 7.9))
    talk.cues = cues
    align_text(found, talk, align_piece)
    assert [(piece.text, piece.dropped) for piece in found] == [(f"[S1] {text}", None) for text in said]


@pytest.mark.xdist_group("segment")
def test_a_recording_with_subtitles_keeps_its_speech_with_the_words_said(tmp_path):
    def write(folder):
        truth = planted_speech.write_written_forms(folder)
        for name in ("forms/script", "forms/plain"):  # each sentence a cue, timed a little off, as by hand
            text = (folder / f"{name}.txt").read_text(encoding="utf-8")
            (folder / f"{name}.txt").unlink()
            sentences = truth[name]["sentences"]
            assert " ".join(s["text"] for s in sentences) == text.strip()
            cues = [f"{number + 1}\n{stamp(s['start'] - 0.3)} --> {stamp(s['end'] + 0.2)}\n{s['text']}\n"
                    for number, s in enumerate(sentences)]  # fmt: skip
            (folder / f"{name}.srt").write_text("\n".join(cues), encoding="utf-8")
        return truth

    _, report, scores = segment_planted(write, tmp_path)
    assert report["skipped"] == {}
    for name, row in scores.items():
        assert row["wrong_text"] == 0 and row["good_kept"] >= 0.9 * row["good_seconds"], (name, row)


def stamp(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    return f"{int(seconds // 3600):02d}:{int(seconds % 3600 // 60):02d}:{seconds % 60:06.3f}".replace(".", ",")
