"""metadata.csv and corrections.csv as a spreadsheet saves them (tpu_demo.data.metadata): read as the same table
whatever the byte-order mark, line ends, delimiter, code page or column case; refused in one line, naming the file,
where they cannot be read as written; deleted rows removing clips only where they are few."""

import csv
import io

import pytest

from tpu_demo.data.metadata import read_corrections_table, read_edits, write_corrections_table
from tpu_demo.errors import FineTuneError

WRITTEN = {f"clips/anna/talk-{n:07d}.wav": f"[S1] Sentence number {n}, said once." for n in range(40)}


def table(path, rows, delimiter=",", encoding="utf-8", header=("audio", "text", "speaker", "language"), end="\n"):
    out = io.StringIO()
    writer = csv.writer(out, delimiter=delimiter, lineterminator=end)
    writer.writerow(header)
    writer.writerows(rows)
    path.write_bytes(out.getvalue().encode(encoding))
    return path


def written_rows(texts=WRITTEN):
    return [[audio, text, "anna", ""] for audio, text in texts.items()]


@pytest.mark.parametrize(
    "delimiter, encoding, end",
    [(",", "utf-8-sig", "\r\n"), (";", "cp1252", "\r\n"), ("\t", "utf-16", "\r\n"), ("|", "latin-1", "\n")],
    ids=["excel-csv-utf8", "excel-european-cp1252", "excel-unicode-text", "latin-1-pipes"],
)
def test_a_resaved_table_is_the_same_table_and_its_one_edit(tmp_path, delimiter, encoding, end):
    rows = written_rows()
    rows[3][1] = "[S1] Sentence number 3, corrected: naïve café."
    rows[5][1] = "  [S1] Sentence number 5,   said once. "  # spaces a spreadsheet may change: no edit
    path = table(tmp_path / "metadata.csv", rows, delimiter, encoding, ("Audio", "TEXT", "Speaker", "language"), end)
    edits = read_edits(path, WRITTEN, allow_removals=False)
    assert edits.texts == {rows[3][0]: "[S1] Sentence number 3, corrected: naïve café."} and edits.removed == []


ADDED = ["clips/anna/other.wav", "[S1] A row I added.", "anna", ""]
TWICE = ["clips/anna/talk-0000001.wav", "[S1] Again.", "anna", ""]
UNQUOTED = ["clips/anna/talk-0000039.wav", "[S1] one", "two", "anna", ""]  # in place of the last row


@pytest.mark.parametrize(
    "header, last, message",
    [
        (("audio", "transcript", "speaker"), None, "metadata.csv: no `text` column (its header: audio, transcript, "
         "speaker); name the columns audio,text as they were written"),
        (("file", "text"), None, "no `audio` column (its header: file, text)"),
        (None, ADDED, "line 42: `clips/anna/other.wav` is no clip this command wrote"),
        (None, TWICE, "lines 3 and 42: clips/anna/talk-0000001.wav twice"),
        (None, UNQUOTED, "line 41: 5 fields under a header of 4 (separated by commas: a text holding one must be "
         "quoted)"),
    ],
)  # fmt: skip
def test_a_table_not_readable_as_written_is_refused_in_one_line(tmp_path, header, last, message):
    rows = written_rows()
    rows = rows[:-1] + [last] if last is UNQUOTED else rows + ([last] if last else [])
    path = table(tmp_path / "metadata.csv", rows, header=header or ("audio", "text", "speaker", "language"))
    with pytest.raises(FineTuneError, match="nothing was changed or deleted") as refused:
        read_edits(path, WRITTEN, allow_removals=False)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert str(path) in str(refused.value)


def test_an_emptied_text_is_no_removal(tmp_path):
    rows = written_rows()
    rows[7][1] = " "
    path = table(tmp_path / "metadata.csv", rows)
    with pytest.raises(FineTuneError, match=r"line 9: clips/anna/talk-0000007.wav has no text; to remove the clip, "):
        read_edits(path, WRITTEN, allow_removals=False)


def test_characters_the_code_page_lost_are_no_edit(tmp_path):
    # Excel's plain "CSV" writes a character cp1252 lacks as `?`: that is not the user's correction
    written = WRITTEN | {"clips/anna/talk-0000000.wav": "[S1] Привет, Anna."}
    rows = written_rows(written)
    rows[0][1] = "[S1] ??????, Anna."
    rows[1][1] = "[S1] Sentence one, corrected."
    path = table(tmp_path / "metadata.csv", rows, encoding="cp1252")
    with pytest.raises(FineTuneError, match=r"line 2: its text lost characters to `\?` \('\[S1\] Привет, Anna.' was "):
        read_edits(path, written, allow_removals=False)


@pytest.mark.parametrize("clips, deleted, asked", [(40, 3, False), (40, 4, True), (8, 1, False), (8, 2, True),
                                                   (20, 2, False), (20, 3, True)])  # fmt: skip
def test_rows_deleted_remove_their_clips_where_few_and_more_ask(tmp_path, clips, deleted, asked):
    written = dict(list(WRITTEN.items())[:clips])
    rows = written_rows(written)[deleted:]
    path = table(tmp_path / "metadata.csv", rows)
    gone = sorted(written)[:deleted]
    if asked:
        with pytest.raises(FineTuneError, match=f"the rows of {deleted} of its {clips} clips are gone") as refused:
            read_edits(path, written, allow_removals=False)
        assert "run again with --allow-removals" in str(refused.value) and gone[0] in str(refused.value)
    assert read_edits(path, written, allow_removals=True).removed == gone
    if not asked:
        assert read_edits(path, written, allow_removals=False).removed == gone


def test_corrections_csv_resaved_by_a_european_spreadsheet_is_read(tmp_path):
    corrections = {("anna/talk", 1.25, 4.5): "[S1] Mine.", ("bob/take1", 0.35, 2.0): None}
    write_corrections_table(tmp_path / "corrections.csv", corrections)
    assert read_corrections_table(tmp_path / "corrections.csv") == corrections
    rows = [["anna/talk", "1,25", "4,5", "[S1] Mine.", ""], ["bob/take1", "0,35", "2", "", "yes"]]
    header = ("recording", "start", "end", "text", "removed")
    path = table(tmp_path / "resaved.csv", rows, ";", "utf-8-sig", header, "\r\n")
    assert read_corrections_table(path) == corrections
    table(path, [["anna/talk", "soon", "4,5", "[S1] Mine.", ""]], ";", "utf-8-sig", header)
    with pytest.raises(FineTuneError, match=r"resaved.csv line 2: start and end are no numbers of seconds"):
        read_corrections_table(path)
