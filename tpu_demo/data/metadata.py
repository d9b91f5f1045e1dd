"""The tables of a segmented dataset that a user edits (metadata.csv, corrections.csv), read as a spreadsheet saves
them, and what their edits mean.

A spreadsheet re-saves a CSV in its own way: Excel's "CSV UTF-8" puts a byte-order mark before it and ends lines with
CRLF; a European Excel separates fields with `;`; its plain "CSV" is the Windows code page (cp1252), "Unicode text"
is tab-separated UTF-16; column names change case. All of these are read as the same table. What cannot be read as
the table the segmenter wrote (no `audio` or `text` column, a row it did not write, a row of more fields than the
header, characters the code page lost) is refused in one line naming the file and what is wrong: such a file never
turns into deletions. Rows the user deleted remove their clips only where they are few: more ask for
`--allow-removals`.
"""

import codecs
import csv
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from tpu_demo.errors import FineTuneError

DELIMITERS = (",", ";", "\t", "|")
DELIMITER_NAMES = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "`|`"}
ALLOW_REMOVALS = "--allow-removals"
FEW = 3  # rows a run removes without being asked: at most this many, and at most a tenth of the rows (at least one)


@dataclass
class Table:
    path: Path
    text: str  # decoded, the byte-order mark left out
    encoding: str  # as found: UTF-8, UTF-16, cp1252 or latin-1
    delimiter: str
    rows: list[tuple[int, dict[str, str]]]  # (line in the file, the row by lower-case column name)


def decode(path: Path) -> tuple[str, str]:
    """The file's text and its encoding: UTF-16 (with its mark), UTF-8 (a mark or not), else the Windows code page
    Excel saves plain CSV in (cp1252), else latin-1."""
    data = path.read_bytes()
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return data.decode("utf-16"), "UTF-16"
    try:
        return data.decode("utf-8-sig"), "UTF-8"
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252"), "cp1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "latin-1"


def header_of(line: str, delimiter: str) -> list[str]:
    fields = next(csv.reader([line], delimiter=delimiter), [])
    return [field.strip().strip("\ufeff").lower() for field in fields]


def read_table(path: Path, needed: tuple[str, ...]) -> Table:
    """`path` as a table with the columns `needed` (in any case, any order, other columns besides), whatever the
    spreadsheet that saved it; refused in one line where it cannot be read so."""
    text, encoding = decode(path)
    first = next((line for line in text.splitlines() if line.strip()), "")
    found = {delimiter: header_of(first, delimiter) for delimiter in DELIMITERS}
    delimiter = next((d for d in DELIMITERS if all(name in found[d] for name in needed)), None)
    if delimiter is None:
        columns = max(found.values(), key=len)
        missing = [name for name in needed if name not in columns]
        raise FineTuneError(
            f"{path}: no {', '.join(f'`{name}`' for name in missing)} column (its header: "
            f"{', '.join(columns) or 'none'}); name the columns {','.join(needed)} as they were written, then run "
            "again (nothing was changed or deleted)"
        )
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [name.strip().strip("\ufeff").lower() for name in next(reader)]
    rows = []
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as error:
            raise FineTuneError(f"{path} line {reader.line_num}: {error} (nothing was changed or deleted)") from None
        if not any(field.strip() for field in fields):  # an empty row, as a spreadsheet leaves at the end
            continue
        if len(fields) > len(header):
            raise FineTuneError(
                f"{path} line {reader.line_num}: {len(fields)} fields under a header of {len(header)} (separated by "
                f"{DELIMITER_NAMES[delimiter]}: a text holding one must be quoted); nothing was changed or deleted"
            )
        rows.append((reader.line_num, {name: field for name, field in zip(header, fields, strict=False)}))
    return Table(path, text, encoding, delimiter, rows)


def same_text(text: str) -> str:
    """A text as compared with what was written: spaces and Unicode composition as a spreadsheet may change them."""
    return unicodedata.normalize("NFC", " ".join(text.split()))


def lost_characters(text: str, written: str) -> bool:
    """Whether `text` is `written` with characters beyond ASCII replaced by `?`, as Excel saves those its code page
    lacks (then the file is plain ASCII, read as UTF-8: its encoding cannot say so)."""
    pairs = list(zip(text, written, strict=False))
    return len(text) == len(written) and all(a == b or (a == "?" and ord(b) > 127) for a, b in pairs)


def clip_path(audio: str) -> str:
    return audio.strip().replace("\\", "/")


@dataclass
class Edits:
    texts: dict[str, str]  # clip file -> the user's text
    removed: list[str]  # clip files whose rows are gone


def read_edits(path: Path, written: dict[str, str], allow_removals: bool) -> Edits:
    """What the user changed in metadata.csv at `path`, against the texts `written` (clip file -> text): edited texts
    and deleted rows. Refused, naming the file: a row of a clip not written, a clip twice, a row without text, a text
    whose characters the file's code page lost, and more deleted rows than a few without `allow_removals`."""
    table = read_table(path, ("audio", "text"))
    texts, lines = {}, {}
    for line, row in table.rows:
        audio, text = clip_path(row.get("audio") or ""), row.get("text") or ""
        if audio not in written:
            shown = f"`{audio}`" if audio else "no audio file"
            raise FineTuneError(
                f"{path} line {line}: {shown} is no clip this command wrote (edit texts or delete rows only; a clip "
                "needs its recording); nothing was changed or deleted"
            )
        if audio in texts:
            raise FineTuneError(
                f"{path} lines {lines[audio]} and {line}: {audio} twice; nothing was changed or deleted"
            )
        if not text.strip():
            raise FineTuneError(
                f"{path} line {line}: {audio} has no text; to remove the clip, delete its row (nothing was changed or "
                "deleted)"
            )
        texts[audio], lines[audio] = text, line
    edited = {}
    for audio, text in texts.items():
        if same_text(text) != same_text(written[audio]):
            edited[audio] = " ".join(text.split())
            if lost_characters(same_text(text), same_text(written[audio])):
                raise FineTuneError(
                    f"{path} line {lines[audio]}: its text lost characters to `?` ({written[audio]!r} was written): "
                    "saved in a code page that cannot hold them; save it as CSV UTF-8 (nothing was changed or "
                    "deleted)"
                )
    removed = sorted(set(written) - set(texts))
    allowed = min(FEW, max(1, len(written) // 10))
    if len(removed) > allowed and not allow_removals:
        names = ", ".join(removed[:5]) + (f" and {len(removed) - 5} more" if len(removed) > 5 else "")
        raise FineTuneError(
            f"{path}: the rows of {len(removed)} of its {len(written)} clips are gone ({names}); to remove these "
            f"clips, run again with {ALLOW_REMOVALS}; else restore the rows (nothing was changed or deleted)"
        )
    return Edits(edited, removed)


CORRECTION_COLUMNS = ("recording", "start", "end", "text", "removed")


def read_corrections_table(path: Path) -> dict[tuple, str | None]:
    """corrections.csv, as this command wrote it or a spreadsheet re-saved it: the user's text by clip (recording,
    start, end), None for a clip removed. Refused in one line where a row cannot be read."""
    corrections = {}
    for line, row in read_table(path, CORRECTION_COLUMNS[:4]).rows:
        try:
            seconds = [float(row[name].strip().replace(",", ".")) for name in ("start", "end")]  # 1,25: a European one
            key = (clip_path(row["recording"]), *seconds)
        except (KeyError, ValueError, AttributeError):
            raise FineTuneError(
                f"{path} line {line}: start and end are no numbers of seconds ({row.get('start')!r}, "
                f"{row.get('end')!r}); nothing was changed or deleted"
            ) from None
        removed = (row.get("removed") or "").strip().lower() == "yes"
        corrections[key] = None if removed else " ".join((row.get("text") or "").split())
    return corrections


def write_corrections_table(path: Path, corrections: dict[tuple, str | None]) -> None:
    """corrections.csv, whole or not at all (a run stopped while writing leaves the one before)."""
    table = io.StringIO()
    writer = csv.writer(table)
    writer.writerow(CORRECTION_COLUMNS)
    writer.writerows([*clip, text or "", "yes" if text is None else ""] for clip, text in sorted(corrections.items()))
    partial = path.with_suffix(".csv.tmp")
    partial.write_text(table.getvalue(), encoding="utf-8")
    partial.replace(path)
