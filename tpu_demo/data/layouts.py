"""The data layouts TTS users already have, read as recordings with transcripts; what was detected is said.

- a CSV with a header naming an audio and a text column: `audio,text[,speaker,language]` (this project's), the
  Hugging Face audiofolder's `file_name,transcription` (or `text`), F5-TTS's `audio_file|text`, Common Voice's
  tab-separated `path`/`sentence`;
- JSON lines with the same keys, NeMo's `audio_filepath`/`text` manifests among them;
- LJSpeech: a headerless `id|text|normalized` metadata.csv, the audio in `wavs/<id>.wav`;
- the original Dia fine-tuners' headerless `audio|text`;
- a folder holding one of these as metadata.csv or metadata.jsonl (an audiofolder, an LJSpeech download).

Audio paths are relative to the manifest's folder, or to `audio_dir` (LJSpeech: the folder of its WAV files).
"""

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from tpu_demo.data.audio import ManifestRow, row_numbers
from tpu_demo.errors import FineTuneError

AUDIO_COLUMNS = ("audio", "file_name", "audio_file", "audio_filepath", "audio_path", "path", "wav", "filename")
TEXT_COLUMNS = ("text", "transcription", "transcript", "normalized_text", "sentence")
OPTIONAL_COLUMNS = ("speaker", "language")
ACCEPTED = (
    "a header with an audio column (audio, file_name, audio_file, audio_filepath, ...) and a text column "
    "(text, transcription, ...) in CSV, `|`- or tab-separated (Common Voice's TSV) or JSON lines; LJSpeech's "
    "headerless id|text|normalized; "
    "headerless audio|text"
)
MANIFEST_NAMES = ("metadata.csv", "metadata.jsonl", "metadata.json")
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus")


@dataclass
class Recordings:
    layout: str  # what was detected, in words
    rows: list[ManifestRow]


def manifest_in(folder: Path) -> Path:
    """A folder's manifest (an audiofolder's or LJSpeech's metadata file)."""
    for name in MANIFEST_NAMES:
        if (folder / name).is_file():
            return folder / name
    raise FineTuneError(
        f"{folder}: no {', '.join(MANIFEST_NAMES)} (a folder of recordings holds one: {ACCEPTED}), no metadata.jsonl "
        "of pre-computed codes, and no `datasets` folder"
    )


def read_recordings(path, audio_dir=None) -> Recordings:
    """The rows of a manifest file or of a folder's manifest; a missing transcript or audio file names its row."""
    path = Path(path)
    if path.is_dir():
        path = manifest_in(path)
    if not path.is_file():
        raise FineTuneError(f"dataset manifest {path} does not exist")
    base = Path(audio_dir) if audio_dir else path.parent
    if audio_dir and not base.is_dir():
        raise FineTuneError(f"audio_dir {audio_dir}: no such folder")
    if path.suffix.lower() in AUDIO_SUFFIXES:
        raise FineTuneError(f"dataset {path} is a recording: give the manifest (or folder) that lists it")
    try:
        if path.suffix.lower() in (".jsonl", ".json"):
            layout, records = json_lines(path)
        else:
            layout, records = delimited(path)
    except UnicodeDecodeError as error:
        raise FineTuneError(
            f"{path}: not UTF-8 text (byte {error.object[error.start]:#x} at offset {error.start}); save it as UTF-8"
        ) from None
    if layout == "LJSpeech":
        base = Path(audio_dir) if audio_dir else path.parent / "wavs"
    rows, faults = [], []
    for number, record in records:
        try:
            rows.append(row_of(path, number, record, base))
        except FineTuneError as fault:  # every bad row in one run, not one run per row
            faults.append((number, fault))
    if faults:
        others = [number for number, _ in faults[1:]]
        more = f"; {len(others)} more bad rows: {row_numbers(others)}" if others else ""
        raise FineTuneError(f"{faults[0][1]}{more}")
    if not rows:
        raise FineTuneError(f"{path}: no rows")
    return Recordings(f"{path}: {layout}, audio in {base}", rows)


def json_lines(path: Path):
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1):
        if line.strip():
            try:
                records.append((number, json.loads(line)))
            except json.JSONDecodeError as error:
                raise FineTuneError(f"{path}, line {number}: not JSON ({error.msg})") from None
    if not records:
        return "JSON lines", []
    audio, text = columns(path, list(records[0][1]))
    layout = f"JSON lines ({', '.join(used_columns(list(records[0][1]), audio, text))})"
    return layout, [(number, named(record, audio, text)) for number, record in records]


def delimited(path: Path):
    """CSV (quoted as CSV is), `|`- or tab-separated lines (never quoted: LJSpeech's and Common Voice's texts hold
    quotes and commas)."""
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    if not lines:
        return "empty", []
    if "|" in lines[0] or "\t" in lines[0]:
        separator = "|" if "|" in lines[0] else "\t"
        table = [(number, line.split(separator)) for number, line in enumerate(lines, 1) if line.strip()]
    else:
        table, separator = [], ","
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            for fields in reader:
                if fields:
                    table.append((reader.line_num, fields))
    header = [field.strip() for field in table[0][1]]
    if any(name.lower() in AUDIO_COLUMNS + TEXT_COLUMNS for name in header):
        audio, text = columns(path, header)
        kind = {",": "CSV", "|": "|-separated", "\t": "tab-separated"}[separator]
        for number, fields in table[1:]:
            if len(fields) != len(header):
                quote = " (a comma inside a transcript must be in quotes)" if separator == "," else ""
                raise FineTuneError(
                    f"{path}, line {number}: {len(fields)} fields, but the header has {len(header)}{quote}"
                )
        records = [
            (number, named(dict(zip(header, fields, strict=True)), audio, text)) for number, fields in table[1:]
        ]
        return f"{kind} with a header ({', '.join(used_columns(header, audio, text))})", records
    if separator == "|" and len(header) in (2, 3):
        width = len(header)
        for number, fields in table:
            if len(fields) != width:
                raise FineTuneError(f"{path}, line {number}: {len(fields)} `|`-separated fields, line 1 has {width}")
        if width == 3:  # LJSpeech: the normalized text (numbers and abbreviations spelled out), else the text
            return "LJSpeech", [
                (number, {"audio": f"{f[0].strip()}.wav", "text": f[2].strip() or f[1]}) for number, f in table
            ]
        return "audio|text without a header", [(number, {"audio": f[0], "text": f[1]}) for number, f in table]
    found = ", ".join(header[:6]) + (", ..." if len(header) > 6 else "")
    raise FineTuneError(f"{path}: layout not recognised (line 1: {len(header)} fields: {found}); accepted: {ACCEPTED}")


def columns(path: Path, names: list[str]) -> tuple[str, str]:
    """The audio and the text column among `names` (case ignored), or an error naming the columns found."""
    lowered = {name.lower(): name for name in names}
    audio = next((lowered[c] for c in AUDIO_COLUMNS if c in lowered), None)
    text = next((lowered[c] for c in TEXT_COLUMNS if c in lowered), None)
    if audio is None or text is None:
        missing = ", ".join(kind for kind, name in (("audio", audio), ("text", text)) if name is None)
        raise FineTuneError(f"{path}: no column {missing} (columns found: {', '.join(names)}); accepted: {ACCEPTED}")
    return audio, text


def used_columns(names: list[str], audio: str, text: str) -> list[str]:
    """The columns read: audio, text, and speaker and language where there are (case ignored, as for the others)."""
    lowered = {name.lower(): name for name in names}
    return [audio, text, *(lowered[name] for name in OPTIONAL_COLUMNS if name in lowered)]


def named(record: dict, audio: str, text: str) -> dict:
    lowered = {str(key).lower(): value for key, value in record.items()}
    return {**record, "audio": record.get(audio), "text": record.get(text)} | {
        name: lowered.get(name) for name in OPTIONAL_COLUMNS
    }


def row_of(path: Path, number: int, record: dict, base: Path) -> ManifestRow:
    where = f"{path}, row {number}"
    audio, text = str(record.get("audio") or "").strip(), str(record.get("text") or "").strip()
    if not audio:
        raise FineTuneError(f"{where}: no audio file")
    if not text:
        raise FineTuneError(f"{where} ({audio}): missing transcript")
    audio_path = (base / audio).resolve()
    if not audio_path.is_file():
        raise FineTuneError(f"{where}: audio file {audio_path} does not exist")
    return ManifestRow(number, audio_path, text, record.get("speaker") or None, record.get("language") or None)
