"""A user's recordings in: a manifest of WAV/FLAC files, encoded once by a DacModel, cached, and refused clearly."""

import csv
import dataclasses
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.demo_utils import CONFIG, assert_ok, run_demo, summary, tiny_codec
from tests.testing_utils import ROOT, accelerate_launch, bug_on_unpatched, require_dia
from tpu_demo.errors import FineTuneError

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytest.importorskip("soxr", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia

CODEC_RATE = 16000


def tone(seconds: float, rate: int, pitch: float, channels: int = 1, level: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    mono = level * np.sin(2 * np.pi * pitch * t).astype(np.float32)
    return np.stack([mono] * channels, axis=1) if channels > 1 else mono


def recordings(folder: Path, count: int = 12, **columns) -> Path:
    """`count` WAV/FLAC files at 22.05 kHz (every third stereo) and a CSV manifest, in a folder of their own."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "clips").mkdir(exist_ok=True)
    rows = []
    for i in range(count):
        name = f"clips/{i:02d}.{'flac' if i % 4 == 3 else 'wav'}"
        pitch = [220.0, 330.0, 440.0][i % 3]
        audio = tone(0.4 + 0.05 * (i % 3), 22050, pitch, 2 if i % 3 == 0 else 1, level=0.3 + 0.02 * i)
        soundfile.write(folder / name, audio, 22050)  # every file distinct: the cache is keyed by content
        extra = {key: values[i % len(values)] for key, values in columns.items()}
        rows.append({"audio": name, "text": f"[S1] tone {pitch:.0f}", **extra})
    with open(folder / "metadata.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return folder / "metadata.csv"


def speak(text: str, path: Path) -> bool:
    """Real speech from espeak-ng (a Debian package) where it is installed; False where it is not."""
    espeak = shutil.which("espeak-ng")
    return bool(espeak) and subprocess.run([espeak, "-w", str(path), text], capture_output=True).returncode == 0


def snapshot(folder: Path) -> dict:
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def test_manifest_rows_language_tags_and_json_lines(tmp_path):
    from tpu_demo.data.layouts import read_recordings

    manifest = recordings(tmp_path / "user", count=3, language=["de", ""], speaker=["anna"])
    rows = read_recordings(manifest).rows
    assert [row.row for row in rows] == [2, 3, 4]  # as a spreadsheet counts them, after the header
    assert rows[0].prompt == "[de] [S1] tone 220" and rows[1].prompt == "[S1] tone 330"
    assert rows[0].audio == (tmp_path / "user/clips/00.wav").resolve()
    jsonl = tmp_path / "user/metadata.jsonl"
    jsonl.write_text("\n".join(json.dumps({"audio": f"clips/0{i}.wav", "text": "hi"}) for i in range(2)) + "\n")
    assert [row.audio.name for row in read_recordings(jsonl).rows] == ["00.wav", "01.wav"]


@pytest.mark.parametrize(
    "content, message",
    [
        ("audio,words\nclips/00.wav,hi\n", "no column text"),
        ("audio,text\nclips/00.wav,hi\nclips/01.wav,\n", r"row 3 \(clips/01.wav\): missing transcript"),
        ("audio,text\nclips/00.wav,hi\nclips/missing.wav,hi\n", "row 3: audio file .*missing.wav does not exist"),
        ("audio,text\n", "no rows"),
    ],
    ids=["missing_column", "missing_transcript", "missing_file", "empty"],
)
def test_manifest_errors_name_the_row(tmp_path, content, message):
    from tpu_demo.data.layouts import read_recordings

    recordings(tmp_path / "user", count=2)
    manifest = tmp_path / "user/bad.csv"
    manifest.write_text(content)
    with pytest.raises(FineTuneError, match=message):
        read_recordings(manifest)


def test_every_bad_row_is_named_in_one_run(tmp_path):
    # only the first was: a manifest with 30 missing files took 30 runs to mend
    from tpu_demo.data.layouts import read_recordings

    recordings(tmp_path / "user", count=2)
    manifest = tmp_path / "user/bad.csv"
    manifest.write_text("audio,text\nclips/gone.wav,hi\nclips/00.wav,hi\nclips/01.wav,\nclips/lost.wav,hi\n")
    with pytest.raises(FineTuneError) as refused:
        read_recordings(manifest)
    message = str(refused.value)
    assert re.match(r".*bad.csv, row 2: audio file .*gone.wav does not exist; 2 more bad rows: 4, 5$", message)
    assert "\n" not in message


@pytest.mark.parametrize("content, message", [(b"not audio at all", "unreadable audio"), (None, "empty audio")])
def test_bad_audio_names_the_file(tmp_path, content, message):
    from tpu_demo.data.audio import load_audio

    path = tmp_path / "bad.wav"
    if content is None:
        soundfile.write(path, np.zeros(0, dtype=np.float32), 22050)
    else:
        path.write_bytes(content)
    with pytest.raises(FineTuneError, match=f"{path}: {message}"):
        load_audio(path, CODEC_RATE)


def test_unreadable_audio_in_a_manifest_names_row_and_file(tmp_path):
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    manifest = recordings(tmp_path / "user", count=3)
    (tmp_path / "user/clips/01.wav").write_bytes(b"not audio")
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    with pytest.raises(FineTuneError, match=r"row 3: .*clips/01.wav: unreadable audio"):
        prepare(read_recordings(manifest).rows, codec, tmp_path / "cache", 1000, "truncate")


def test_audio_is_encoded_once_then_read_from_the_cache(tmp_path):
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    rows = read_recordings(recordings(tmp_path / "user", count=6)).rows
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    first = prepare(rows, codec, tmp_path / "cache", max_frames=1000, too_long="truncate")
    assert (first.encoded, first.cached, first.stereo) == (6, 0, 2)
    again = prepare(rows, codec, tmp_path / "cache", max_frames=1000, too_long="truncate")
    assert (again.encoded, again.cached) == (0, 6)
    codes = [np.asarray(torch.load(tmp_path / "cache" / item["file"])) for item in first.items]
    # 0.4 s at 16 kHz with a hop of 128 samples: 50 frames, 9 codebooks
    assert codes[0].shape == (50, 9) and all(c.min() >= 0 and c.max() < 1024 for c in codes)


def test_equal_length_clips_share_a_batch_and_get_the_codes_of_one_at_a_time(tmp_path):
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    rows = read_recordings(recordings(tmp_path / "user", count=12)).rows  # 3 lengths, 4 clips of each
    rows.append(rows[0])  # the same recording twice: encoded once
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    one_at_a_time = prepare(rows, codec, tmp_path / "cache1", max_frames=1000, too_long="truncate")
    calls = []
    encode = codec.model.encode
    codec.model.encode = lambda audio: calls.append(audio.shape[0]) or encode(audio)
    codec.batch_size = 4  # a GPU's
    batched = prepare(rows, codec, tmp_path / "cache4", max_frames=1000, too_long="truncate")
    assert sorted(calls) == [4, 4, 4]
    assert (
        (batched.encoded, batched.cached, batched.stereo)
        == (12, 1, 4)
        == (one_at_a_time.encoded, one_at_a_time.cached, one_at_a_time.stereo)
    )
    assert batched.items == one_at_a_time.items  # in manifest order
    for item in batched.items:
        assert torch.equal(
            torch.load(tmp_path / "cache4" / item["file"]), torch.load(tmp_path / "cache1" / item["file"])
        )


def test_too_long_audio_is_truncated_or_dropped_and_counted(tmp_path):
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    rows = read_recordings(recordings(tmp_path / "user", count=3)).rows  # 50, 56 and 62 frames
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    truncated = prepare(rows, codec, tmp_path / "cache", max_frames=55, too_long="truncate")
    assert (len(truncated.items), truncated.truncated) == (3, [3, 4])
    assert "2 truncated to max_audio_frames (rows 3, 4)" in truncated.summary()
    dropped = prepare(rows, codec, tmp_path / "cache", max_frames=55, too_long="drop")
    assert (len(dropped.items), dropped.dropped) == (1, [3, 4])
    assert "(rows 3, 4; the longest recording has 62 frames (row 4): raise max_audio_frames or set too_long: " in (
        dropped.summary()
    )
    with pytest.raises(FineTuneError, match="no sample left to train on"):
        prepare(rows, codec, tmp_path / "cache", max_frames=10, too_long="drop")


def test_the_longest_hint_counts_the_recordings_dropped_for_their_text(tmp_path):
    # it named the longest of the clips encoded (56 frames): raised to that, the next run met the 62 of a clip whose
    # text had been too long
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    rows = read_recordings(recordings(tmp_path / "user", count=3)).rows  # 50, 56 and 62 frames
    rows[2] = dataclasses.replace(rows[2], text="[S1] " + "a long text " * 10)
    gone = dataclasses.replace(rows[2], audio=tmp_path / "gone.wav", row=5)  # what its text drops is not read
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    dropped = prepare([*rows, gone], codec, tmp_path / "cache", max_frames=55, too_long="drop", max_text_tokens=40)
    assert (dropped.dropped, dropped.text_too_long) == ([3], [4, 5])
    assert "the longest recording has 62 frames (row 4): raise max_audio_frames or set too_long: truncate" in (
        dropped.summary()
    )
    assert dropped.encoded == 2  # measured, not encoded
    raised = prepare(rows, codec, tmp_path / "cache", max_frames=62, too_long="drop", max_text_tokens=200)
    assert (len(raised.items), raised.dropped) == (3, [])


def test_a_saved_datasets_folder_is_read_from_its_bytes(tmp_path):
    datasets = pytest.importorskip("datasets", reason="a `datasets` folder needs the datasets package")
    from tpu_demo.data.audio import Codec, prepare, read_saved_dataset

    words = ["hello", "good morning", "thank you"]
    clips = []
    for i, text in enumerate(words):
        clip = tmp_path / "made" / f"{i}.wav"
        clip.parent.mkdir(exist_ok=True)
        if not speak(text, clip):  # tones where espeak-ng is not installed
            soundfile.write(clip, tone(0.4, 22050, 200.0 + 50 * i), 22050)
        clips.append(str(clip))
    table = {"audio": clips, "text": [f"[S1] {w}" for w in words], "language": ["en", "", "de"]}
    dataset = datasets.Dataset.from_dict(table).cast_column("audio", datasets.Audio())
    dataset.save_to_disk(str(tmp_path / "saved"))
    shutil.rmtree(tmp_path / "made")  # the folder holds the audio itself
    rows = read_saved_dataset(tmp_path / "saved")
    assert [row.prompt for row in rows] == ["[S1] hello", "[S1] good morning", "[de] [S1] thank you"]  # en: no tag
    prepared = prepare(rows, Codec(str(tiny_codec(tmp_path / "codec"))), tmp_path / "cache", 10_000, "truncate")
    assert prepared.encoded == 3


def test_codec_the_model_cannot_read_is_refused_before_encoding(tmp_path):
    from tpu_demo.data.audio import Codec
    from tpu_demo.data.training_set import codec_matches_model
    from tpu_demo.model.dia import tiny_config

    codec = Codec(str(tiny_codec(tmp_path / "codec", n_codebooks=8)))
    with pytest.raises(FineTuneError, match="codec has 8 codebooks but the model reads 9 channels"):
        codec_matches_model(codec, tiny_config(), None)


@bug_on_unpatched
def test_recordings_to_a_model_that_learned(tmp_path):
    manifest = recordings(tmp_path / "user", count=24)
    before = snapshot(tmp_path / "user")
    out = tmp_path / "run"
    settings = [f"dataset={manifest}", f"codec={tiny_codec(tmp_path / 'codec')}", "eval_samples=4"]
    settings += ["codebook_weights=[4,1,1,1,1,1,1,1,1]", "loss_on_audio_tokens_only=true"]  # the originals' loss
    result = run_demo(
        out, *settings, "max_steps=30", "max_audio_frames=64", "eval_strategy=no", "save_strategy=no", launcher=False
    )
    assert_ok(result)
    assert "24 samples, 24 encoded, 0 from the cache, 8 stereo files downmixed to mono" in result.stdout
    assert summary(out)["last_loss"] < summary(out)["first_loss"]
    # counted again in the closing summary, after the losses
    assert summary(out)["data"].startswith(f"{manifest}: 24 samples, 24 encoded, 0 from the cache")
    assert result.stdout.rindex("data: ") > result.stdout.rindex("train loss")
    assert snapshot(tmp_path / "user") == before  # nothing written into the user's folder
    assert len(list((out / "audio_codes").rglob("*.pt"))) == 24

    # final/ is all a user needs: the model and the processor that turns its codes back into audio
    from transformers import DiaForConditionalGeneration, DiaProcessor

    shutil.rmtree(tmp_path / "codec")  # the codec the run was given is gone: final/ has its own
    processor = DiaProcessor.from_pretrained(out / "final")
    model = DiaForConditionalGeneration.from_pretrained(out / "final")
    assert processor.feature_extractor.sampling_rate == CODEC_RATE
    assert processor.audio_tokenizer.config.n_codebooks == model.config.decoder_config.num_channels
    waveform = processor.audio_tokenizer.decode(audio_codes=torch.zeros(1, 9, 10, dtype=torch.long))
    assert waveform.audio_values.shape[-1] == 10 * 128


def test_two_processes_share_the_encoding_and_encode_each_file_once(tmp_path):
    # the main process encoded everything while the others waited
    manifest = recordings(tmp_path / "user", count=6)
    codec = tiny_codec(tmp_path / "codec")
    args = [CONFIG, f"dataset={manifest}", f"codec={codec}", f"output_dir={tmp_path / 'run'}", "report_to=none"]
    result = accelerate_launch(ROOT / "tpu_demo/prepare.py", *args, "too_long=truncate", num_processes=2)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "process 0 encoded 3 recordings" in result.stdout and "process 1 encoded 3 recordings" in result.stdout
    assert "6 samples, 6 encoded, 0 from the cache, 2 stereo files downmixed to mono" in result.stdout
    assert len(list((tmp_path / "run" / "audio_codes").rglob("*.pt"))) == 6 and not any(
        (tmp_path / "run" / "audio_codes").rglob("*.tmp")
    )
    again = accelerate_launch(ROOT / "tpu_demo/prepare.py", *args, "too_long=truncate", num_processes=2)
    assert "6 samples, 0 encoded, 6 from the cache" in again.stdout and "process 1 encoded 0" in again.stdout


@pytest.mark.parametrize(
    "codes, message",
    [
        (torch.randint(0, 1024, (10, 8)), r"bad.pt \(sample 2\): codes must be \(frames, 9\), got \(10, 8\)"),
        (torch.full((10, 9), 2000), r"bad.pt \(sample 2\): codes must lie in 0..1023, got 2000..2000"),
    ],
    ids=["wrong_codebooks", "out_of_range"],
)
def test_precomputed_codes_that_the_model_cannot_read_name_the_file(tmp_path, codes, message):
    from tpu_demo.data.codes import CodesDataset

    torch.save(torch.randint(0, 1024, (10, 9)), tmp_path / "good.pt")
    torch.save(codes, tmp_path / "bad.pt")
    lines = [json.dumps({"file": name, "text": "[S1] hi"}) for name in ("good.pt", "bad.pt")]
    (tmp_path / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    dataset = CodesDataset(tmp_path)
    assert dataset[0]["codes"].shape == (10, 9)
    with pytest.raises(FineTuneError, match=message):
        dataset[1]


def test_relative_output_and_cache_folders(tmp_path, monkeypatch):
    # the shipped configs name `output_dir: outputs/...`: a relative cache must not be joined to itself
    from tpu_demo.config.load import parse_all
    from tpu_demo.data.training_set import training_data
    from tpu_demo.model.dia import tiny_config

    manifest = recordings(tmp_path / "user", count=3)
    codec = tiny_codec(tmp_path / "codec")
    monkeypatch.chdir(tmp_path)
    for cache in (None, "codes_cache"):
        raw = {"dataset": str(manifest), "codec": str(codec), "output_dir": "outputs/run", "report_to": "none"}
        raw["too_long"] = "truncate"  # the clips are longer than the default max_audio_frames
        parts = parse_all({**raw, **({"cache_dir": cache} if cache else {})})
        dataset = training_data(parts.data, tiny_config(), parts.training.output_dir, 0)
        assert len(dataset) == 3 and dataset[0]["codes"].shape[1] == 9
        assert (tmp_path / (cache or "outputs/run/audio_codes")).is_dir()


def test_transcripts_longer_than_the_text_length_are_dropped_and_named(tmp_path):
    # the collator cut them at max_text_tokens without a word (a dialogue lost its last turn)
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    manifest = recordings(tmp_path / "user", count=3)
    lines = manifest.read_text().splitlines()
    lines[2] = lines[2].replace("[S1] tone 330", "[S1] tone 330. [S2] and a second turn that does not fit")
    manifest.write_text("\n".join(lines) + "\n")
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    prepared = prepare(read_recordings(manifest).rows, codec, tmp_path / "cache", 1000, "drop", max_text_tokens=20)
    assert [item["row"] for item in prepared.items] == [2, 4] and prepared.encoded == 2  # not even encoded
    assert "1 dropped as the transcript is longer than max_text_tokens 20 (rows 3)" in prepared.summary()


def test_long_audio_is_dropped_by_default():
    # truncating keeps the clip's first seconds with its whole transcript: words the audio no longer holds
    from tpu_demo.config.arguments import DataArguments

    assert DataArguments().too_long == "drop"


def test_a_clip_too_short_to_encode_names_its_row_and_silent_or_very_short_ones_are_named(tmp_path):
    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    manifest = recordings(tmp_path / "user", count=3)
    soundfile.write(tmp_path / "user/clips/01.wav", np.zeros(8820, dtype=np.float32), 22050)  # 0.4 s of silence
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    prepared = prepare(read_recordings(manifest).rows, codec, tmp_path / "cache", 1000, "truncate")
    assert "1 silent (rows 3: check the recordings)" in prepared.summary()
    soundfile.write(tmp_path / "user/clips/02.wav", tone(0.2, 22050, 440.0), 22050)  # encodes, but says nothing
    prepared = prepare(read_recordings(manifest).rows, codec, tmp_path / "cache", 1000, "truncate")
    assert "1 shorter than 0.25 s (rows 4: check the recordings)" in prepared.summary()
    soundfile.write(tmp_path / "user/clips/00.wav", tone(0.005, 22050, 220.0), 22050)  # 5 ms
    with pytest.raises(FineTuneError, match=r"row 2: .*00.wav: 0.005 s of audio is too short for the codec"):
        prepare(read_recordings(manifest).rows, codec, tmp_path / "cache", 1000, "truncate")


def test_a_datasets_folder_without_the_package_names_what_to_install(tmp_path, monkeypatch):
    import sys

    from tpu_demo.data.audio import read_saved_dataset

    monkeypatch.setitem(sys.modules, "datasets", None)  # as if it were not installed
    (tmp_path / "dataset_info.json").write_text("{}")
    with pytest.raises(FineTuneError, match="reading it needs the datasets package"):
        read_saved_dataset(tmp_path)
