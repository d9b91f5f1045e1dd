"""Users' recordings to Dia audio codes: a manifest in, DAC codes out, cached by audio content and codec.

Manifests in the layouts users have are read by `tpu_demo.data.layouts`. A `datasets` folder written by `save_to_disk`
(an `Audio` column `audio` and a `text` column) works too; its audio is read from the stored bytes, never decoded by
`datasets`. WAV, FLAC, MP3 and OGG at any rate, mono or stereo (downmixed), are resampled to the codec's rate (soxr)
and encoded with a transformers `DacModel`. A `language` other than English becomes a `[xx]` tag at the start of the
text (Dia learned English untagged); `speaker` names whose voice `eval_speaker_model` compares samples with (it is
not used in training).
"""

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tpu_demo.errors import LOAD_ERRORS, FineTuneError, require_folder
from tpu_demo.model.tokens import text_tokens, with_language


@dataclass
class ManifestRow:
    row: int  # 1-based, as a user counts lines of data
    audio: Path  # the file, or for a `datasets` row the name it was stored under
    text: str
    speaker: str | None = None
    language: str | None = None
    data: bytes | None = None  # a `datasets` row's audio bytes
    held_out: bool = False  # from the data's own test split: evaluated, never trained on

    def content(self) -> bytes:
        return self.data if self.data is not None else self.audio.read_bytes()

    @property
    def prompt(self) -> str:
        return with_language(self.text, self.language)


def read_saved_dataset(folder: Path) -> list[ManifestRow]:
    """The rows of a `datasets` folder written by `save_to_disk`. A DatasetDict's `train` split is trained on and its
    `test` split (else `validation`) is the held-out set."""
    try:
        import datasets
    except ImportError:
        raise FineTuneError(
            f"{folder} is a `datasets` folder: reading it needs the datasets package (pip install datasets, or the "
            "fine-tuner's `datasets` extra)"
        ) from None

    loaded = datasets.load_from_disk(str(folder))
    splits = {"train": loaded}
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise FineTuneError(f"{folder}: a DatasetDict without a train split ({', '.join(loaded)})")
        held_out = next((name for name in ("test", "validation") if name in loaded), None)
        splits = {"train": loaded["train"]} | ({held_out: loaded[held_out]} if held_out else {})
    rows = []
    for split, table in splits.items():
        rows += split_rows(folder, split, table, held_out=split != "train")
    if not any(not row.held_out for row in rows):
        raise FineTuneError(f"{folder}: no rows")
    return rows


def split_rows(folder: Path, split: str, table, held_out: bool) -> list[ManifestRow]:
    import datasets

    missing = {"audio", "text"} - set(table.column_names)
    if missing:
        raise FineTuneError(
            f"{folder} ({split}): no column {', '.join(sorted(missing))} (columns found: "
            f"{', '.join(table.column_names)}; needed: audio, text[, language])"
        )
    table = table.cast_column("audio", datasets.Audio(decode=False))
    rows = []
    for number, record in enumerate(table, 1):
        audio, text = record["audio"] or {}, (record.get("text") or "").strip()
        name = audio.get("path") or f"row {number}"
        where = f"{folder}, {split} row {number}" if held_out else f"{folder}, row {number}"
        if not text:
            raise FineTuneError(f"{where} ({name}): missing transcript")
        data = audio.get("bytes")
        path = Path(name)
        if data is None and not path.is_file():
            raise FineTuneError(f"{where}: no audio bytes and no file {name}")
        language = record.get("language") or None
        rows.append(ManifestRow(number, path, text, record.get("speaker") or None, language, data, held_out))
    return rows


def load_audio(path, sampling_rate: int, data: bytes | None = None):
    """Mono float32 samples at `sampling_rate`, and the number of channels the file (or `data`) had."""
    import io

    import soundfile
    import soxr

    try:
        samples, rate = soundfile.read(io.BytesIO(data) if data is not None else path, dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError) as error:
        raise FineTuneError(f"{path}: unreadable audio ({error})") from None
    if samples.size == 0:
        raise FineTuneError(f"{path}: empty audio")
    channels = samples.shape[1]
    mono = samples.mean(axis=1)
    if rate != sampling_rate:
        mono = soxr.resample(mono, rate, sampling_rate)
    return mono, channels


SILENCE = 1e-4  # peak amplitude below which a clip holds nothing audible
SHORT = 0.25  # seconds: less than a syllable


class Codec:
    """A `DacModel` from a local folder (or a hub id when the hub is reachable), with a fingerprint for the cache."""

    def __init__(self, name_or_path: str, device="cpu"):
        from tpu_demo.model.dia import load_codec

        require_folder("codec", name_or_path)
        try:
            self.model = load_codec(name_or_path).to(device).eval()
        except LOAD_ERRORS as error:
            raise FineTuneError(f"codec {name_or_path}: not a DacModel folder or reachable hub id ({error})") from None
        config = self.model.config
        self.sampling_rate, self.num_codebooks = config.sampling_rate, config.n_codebooks
        self.device = device
        # equal-length clips encoded as one batch: on a GPU; on CPU a batch is slower (benchmark --encode)
        self.batch_size = 16 if torch.device(device).type == "cuda" else 1
        digest = hashlib.sha256(json.dumps(config.to_dict(), sort_keys=True, default=str).encode())
        for tensor in self.model.state_dict().values():
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        self.fingerprint = digest.hexdigest()[:16]

    def frames_in(self, row) -> int:
        """The code frames `row`'s audio encodes to (the codec's convolutions drop a last partial hop), or 0 where it
        cannot be read."""
        try:
            samples, _ = load_audio(row.audio, self.sampling_rate, row.content())
        except (FineTuneError, OSError):  # a row dropped for its text is not refused for its audio
            return 0
        return len(samples) // self.model.config.hop_length

    @torch.no_grad()
    def encode(self, clips) -> list[torch.Tensor]:
        """(frames, codebooks) codes of each of `clips`, mono samples at the codec's rate, all of one length."""
        audio = torch.stack([torch.as_tensor(samples, dtype=torch.float32) for samples in clips])[:, None]
        codes = self.model.encode(audio.to(self.device)).audio_codes.cpu()
        return [clip_codes.T.contiguous() for clip_codes in codes]


@dataclass
class Prepared:
    items: list[dict]  # {"file": cached codes, "text": prompt, "row": manifest row[, "speaker"][, "held_out"]}
    encoded: int = 0
    cached: int = 0
    truncated: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    text_too_long: list[int] = field(default_factory=list)
    silent: list[int] = field(default_factory=list)  # kept, but named: usually a recording that failed
    short: list[int] = field(default_factory=list)  # kept, but named: a word or less, often a cut recording
    max_text_tokens: int = 0
    stereo: int = 0
    longest_dropped: int = 0  # code frames of the longest recording, among those dropped for their audio or text
    longest_row: int = 0

    def add_encoding_of(self, parts: list["Prepared"]) -> None:
        """What `parts` (the shares other processes encoded, now in the cache this pass read) found when encoding."""
        encoded = sum(part.encoded for part in parts)
        self.encoded, self.cached = encoded, self.cached - encoded
        for name in ("silent", "short"):
            setattr(self, name, sorted(row for part in parts for row in getattr(part, name)))
        self.stereo = sum(part.stereo for part in parts)

    def summary(self) -> str:
        parts = [f"{len(self.items)} samples", f"{self.encoded} encoded", f"{self.cached} from the cache"]
        if self.stereo:
            parts.append(f"{self.stereo} stereo files downmixed to mono")
        if self.truncated:
            parts.append(f"{len(self.truncated)} truncated to max_audio_frames (rows {row_numbers(self.truncated)})")
        if self.dropped:
            parts.append(
                f"{len(self.dropped)} dropped as longer than max_audio_frames (rows {row_numbers(self.dropped)}; the "
                f"longest recording has {self.longest_dropped} frames (row {self.longest_row}): raise "
                "max_audio_frames or set too_long: truncate)"
            )
        if self.silent:
            parts.append(f"{len(self.silent)} silent (rows {row_numbers(self.silent)}: check the recordings)")
        if self.short:
            shown = row_numbers(self.short)
            parts.append(f"{len(self.short)} shorter than {SHORT} s (rows {shown}: check the recordings)")
        if self.text_too_long:
            parts.append(
                f"{len(self.text_too_long)} dropped as the transcript is longer than max_text_tokens "
                f"{self.max_text_tokens} (rows {row_numbers(self.text_too_long)})"
            )
        return ", ".join(parts)


def row_numbers(numbers) -> str:
    shown = ", ".join(map(str, numbers[:10]))
    return shown + (f" and {len(numbers) - 10} more" if len(numbers) > 10 else "")


class Encoding:
    """Finds each row's codes in the cache or encodes them, equal-length clips among the next rows as one batch of
    up to `codec.batch_size` (one clip at a time on CPU); the audio of at most 4 batches waits in memory."""

    def __init__(self, codec: Codec, cache: Path, result: Prepared):
        self.codec, self.cache, self.result = codec, cache, result
        self.found = {}  # position of a row in the rows added: (cache file, frames)
        self.waiting = {}  # cache file: [(position, row)], of audio read and not encoded yet
        self.by_length = {}  # samples: [(cache file, samples)]

    def add(self, position: int, row) -> None:
        content = row.content()  # read once: it keys the cache and, when not cached, is decoded
        target = self.cache / f"{hashlib.sha256(content).hexdigest()}.pt"
        if target in self.waiting:  # the same recording twice: encoded once
            self.waiting[target].append((position, row))
            self.result.cached += 1
            return
        if target.is_file():
            self.result.cached += 1
            self.found[position] = (target, torch.load(target, weights_only=True).shape[0])
            return
        try:
            samples, channels = load_audio(row.audio, self.codec.sampling_rate, content)
        except FineTuneError as error:  # name the row too: the user fixes the manifest, not the file name
            raise FineTuneError(f"row {row.row}: {error}") from None
        self.result.stereo += channels > 1
        if float(abs(samples).max()) < SILENCE:
            self.result.silent.append(row.row)
        if len(samples) < SHORT * self.codec.sampling_rate:
            self.result.short.append(row.row)
        self.waiting[target] = [(position, row)]
        self.by_length.setdefault(len(samples), []).append((target, samples))
        if len(self.waiting) >= 4 * self.codec.batch_size:
            self.flush()

    def flush(self) -> None:
        size = self.codec.batch_size
        for clips in self.by_length.values():
            for start in range(0, len(clips), size):
                batch = clips[start : start + size]
                try:
                    codes = self.codec.encode([samples for _, samples in batch])
                except RuntimeError as error:  # a clip shorter than the codec's receptive field
                    _, row = self.waiting[batch[0][0]][0]
                    seconds = len(batch[0][1]) / self.codec.sampling_rate
                    raise FineTuneError(
                        f"row {row.row}: {row.audio}: {seconds:.3f} s of audio is too short for the codec to encode "
                        f"({str(error).splitlines()[0][:120]})"
                    ) from None
                for (target, _), clip_codes in zip(batch, codes, strict=True):
                    partial = target.with_suffix(f".{os.getpid()}.tmp")  # processes encoding one clip do not collide
                    torch.save(clip_codes, partial)
                    partial.replace(target)  # whole or absent: an interrupted encoding leaves nothing half-written
                    self.result.encoded += 1
                    for position, _ in self.waiting.pop(target):
                        self.found[position] = (target, clip_codes.shape[0])
        self.by_length.clear()


def prepare(
    rows, codec: Codec, cache_dir, max_frames: int, too_long: str, progress=None, max_text_tokens: int | None = None,
    require_items: bool = True,
) -> Prepared:  # fmt: skip
    """Codes for every row: read from the cache when this audio was encoded by this codec before, else encoded.

    Audio longer than `max_frames` code frames is truncated or dropped (`too_long`) and counted. The cache holds
    full encodings, so changing the maximum never needs a new encoding. A transcript longer than `max_text_tokens`
    would be cut: its row is dropped, before encoding, and counted.
    """
    if too_long not in ("truncate", "drop"):
        raise FineTuneError(f"too_long: {too_long!r} is not one of truncate, drop")
    cache = Path(cache_dir) / codec.fingerprint
    cache.mkdir(parents=True, exist_ok=True)
    result = Prepared(items=[], max_text_tokens=max_text_tokens or 0)
    kept, text_dropped = [], []
    for row in rows:
        if max_text_tokens and text_tokens(row.prompt) > max_text_tokens:
            result.text_too_long.append(row.row)
            text_dropped.append(row)
        else:
            kept.append(row)
    encoding = Encoding(codec, cache, result)
    for position, row in enumerate(progress(kept) if progress else kept):
        encoding.add(position, row)
    encoding.flush()
    for position, row in enumerate(kept):
        target, frames = encoding.found[position]
        if frames > max_frames:
            if too_long == "drop":
                result.dropped.append(row.row)
                result.longest_dropped, result.longest_row = max((result.longest_dropped, result.longest_row),
                                                                 (frames, row.row))  # fmt: skip
                continue
            result.truncated.append(row.row)
        # relative to the cache folder, which the dataset joins: the cache may be a relative path
        item = {"file": str(target.relative_to(cache_dir)), "text": row.prompt, "row": row.row}
        item |= ({"held_out": True} if row.held_out else {}) | ({"speaker": row.speaker} if row.speaker else {})
        result.items.append(item)
    if result.dropped:  # the longest to make room for is also among those the text dropped: measured, not encoded
        for row in text_dropped:
            result.longest_dropped, result.longest_row = max((result.longest_dropped, result.longest_row),
                                                             (codec.frames_in(row), row.row))  # fmt: skip
    if require_items and not result.items:
        raise FineTuneError(f"no sample left to train on ({result.summary()})")
    return result
