"""The data layouts TTS users already have are read as they are, say what was detected, and an unreadable one names
the columns it found and the layouts accepted."""

import json
from pathlib import Path

import numpy as np
import pytest

from tests.demo_utils import assert_ok, run_demo, summary, tiny_codec
from tests.testing_utils import bug_on_unpatched, require_dia
from tpu_demo.errors import FineTuneError

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytest.importorskip("soxr", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia

# LJSpeech's texts hold commas and quotes; its third column spells numbers out
LJSPEECH = [
    ("LJ001-0001", 'He said, "in 1884, yes."', 'He said, "in eighteen eighty-four, yes."'),
    ("LJ001-0002", "Plain words", ""),
    ("LJ002-0010", "Mr. Smith | no", "Mister Smith"),
]


def wav(path: Path, seconds=0.3, pitch=300.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(int(seconds * 22050)) / 22050
    soundfile.write(path, (0.3 * np.sin(2 * np.pi * pitch * t)).astype(np.float32), 22050)
    return path


def ljspeech(folder: Path, rows=LJSPEECH) -> Path:
    for number, (name, _, _) in enumerate(rows):
        wav(folder / "wavs" / f"{name}.wav", pitch=200.0 + 50 * number)
    lines = [f"{name}|{text}|{normalized}" for name, text, normalized in rows if "|" not in text]
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n")
    return folder


def read(path, audio_dir=None):
    from tpu_demo.data.layouts import read_recordings

    return read_recordings(path, audio_dir)


def test_ljspeech_folder(tmp_path):
    recordings = read(ljspeech(tmp_path / "LJSpeech-1.1"))
    assert "LJSpeech" in recordings.layout and str(tmp_path / "LJSpeech-1.1/wavs") in recordings.layout
    assert [row.text for row in recordings.rows] == ['He said, "in eighteen eighty-four, yes."', "Plain words"]
    assert [row.audio.name for row in recordings.rows] == ["LJ001-0001.wav", "LJ001-0002.wav"]
    assert [row.row for row in recordings.rows] == [1, 2]  # headerless: line numbers


@pytest.mark.parametrize(
    "name, content, layout",
    [
        ("metadata.csv", "file_name,transcription\na.wav,\"Hello, there\"\nb.wav,Bye\n", "CSV with a header"),
        ("metadata.csv", "file_name,text\na.wav,Hello\nb.wav,Bye\n", "(file_name, text)"),
        ("metadata.jsonl", '{"file_name": "a.wav", "transcription": "Hello"}\n{"file_name": "b.wav", '
         '"transcription": "Bye"}\n', "JSON lines (file_name, transcription)"),
    ],
)  # fmt: skip
def test_audiofolder_as_a_folder_or_its_file(tmp_path, name, content, layout):
    for clip in ("a.wav", "b.wav"):
        wav(tmp_path / "data" / clip)
    (tmp_path / "data" / name).write_text(content)
    for path in (tmp_path / "data", tmp_path / "data" / name):
        recordings = read(path)
        assert layout in recordings.layout
        assert [row.audio for row in recordings.rows] == [
            (tmp_path / "data" / c).resolve() for c in ("a.wav", "b.wav")
        ]
        assert recordings.rows[1].text == "Bye"


def test_headerless_audio_text_with_an_audio_root(tmp_path):
    wav(tmp_path / "audio/speaker1/one.wav")
    wav(tmp_path / "audio/two.wav")
    manifest = tmp_path / "lists/train.txt"
    manifest.parent.mkdir()
    manifest.write_text("speaker1/one.wav|[S1] First, one.\ntwo.wav|[S1] Second\n")
    recordings = read(manifest, audio_dir=tmp_path / "audio")
    assert "audio|text without a header" in recordings.layout
    assert [row.text for row in recordings.rows] == ["[S1] First, one.", "[S1] Second"]
    assert recordings.rows[0].audio == (tmp_path / "audio/speaker1/one.wav").resolve()
    with pytest.raises(FineTuneError, match=r"train.txt, row 1: audio file .*lists/speaker1/one.wav does not exist"):
        read(manifest)  # without the root, relative to the list's folder


def test_pipe_file_with_a_header_and_nemo_json_lines(tmp_path):
    wav(tmp_path / "a.wav")
    (tmp_path / "f5.csv").write_text("audio_file|text\na.wav|Hello, world\n")
    assert read(tmp_path / "f5.csv").rows[0].text == "Hello, world"
    nemo = {"audio_filepath": "a.wav", "text": "hello", "duration": 0.3}
    (tmp_path / "nemo.json").write_text(json.dumps(nemo) + "\n")
    recordings = read(tmp_path / "nemo.json")
    assert "JSON lines (audio_filepath, text)" in recordings.layout and recordings.rows[0].text == "hello"


def test_common_voice_tsv_and_speaker_and_language_columns_in_any_case(tmp_path):
    # a Common Voice TSV was not recognised; a `Speaker` or `Language` column was read as absent, without a word
    wav(tmp_path / "clips/cv_1.mp3.wav")
    header = "client_id\tpath\tsentence\tup_votes\tlocale\n"
    (tmp_path / "train.tsv").write_text(header + 'c1\tcv_1.mp3.wav\tHe said "no, not 3.5"\t2\ten\n')
    recordings = read(tmp_path / "train.tsv", tmp_path / "clips")
    assert "tab-separated with a header (path, sentence)" in recordings.layout
    assert recordings.rows[0].text == 'He said "no, not 3.5"'
    wav(tmp_path / "a.wav")
    (tmp_path / "metadata.csv").write_text("Audio,Text,Speaker,Language\na.wav,[S1] Hallo,anna,de\n")
    recordings = read(tmp_path / "metadata.csv")
    assert "(Audio, Text, Speaker, Language)" in recordings.layout
    assert (recordings.rows[0].speaker, recordings.rows[0].language) == ("anna", "de")


@pytest.mark.parametrize(
    "content, message",
    [
        # a naive conversion: the transcript would have been cut at its first comma
        ("audio,text\na.wav,Hello, world\n", r"line 2: 3 fields, but the header has 2 \(a comma inside a transcript"),
        ("a.wav,Hello\n", r"layout not recognised \(line 1: 2 fields: a.wav, Hello\); accepted: a header with"),
        ("clip,words\na.wav,Hello\n", r"layout not recognised \(line 1: 2 fields: clip, words\)"),
        ("file_name,speaker\na.wav,anna\n", r"no column text \(columns found: file_name, speaker\); accepted:"),
        ("a.wav|Hello\nb.wav|Hi|there\n", r"line 2: 3 `\|`-separated fields, line 1 has 2"),
    ],
)
def test_an_unreadable_layout_names_what_it_found(tmp_path, content, message):
    wav(tmp_path / "a.wav")
    (tmp_path / "list.csv").write_text(content)
    with pytest.raises(FineTuneError, match=message):
        read(tmp_path / "list.csv")


def test_a_folder_without_a_manifest_says_what_it_looked_for(tmp_path):
    wav(tmp_path / "clips/a.wav")
    with pytest.raises(FineTuneError, match=r"clips: no metadata.csv, metadata.jsonl, metadata.json \(a folder"):
        read(tmp_path / "clips")


def fine_tune(tmp_path, dataset, eval_samples=0):
    """Two steps of the fine-tune on `dataset` with a tiny codec, in this process: its output folder and result."""
    out = tmp_path / "run"
    settings = [f"dataset={dataset}", f"codec={tiny_codec(tmp_path / 'codec')}", f"eval_samples={eval_samples}"]
    settings += ["max_steps=2", "per_device_train_batch_size=2", "max_audio_frames=64", "eval_strategy=no"]
    result = run_demo(out, *settings, "save_strategy=no", launcher=False)
    assert_ok(result)
    return out, result


@bug_on_unpatched
def test_an_ljspeech_download_fine_tunes_as_it_is(tmp_path):
    data = ljspeech(tmp_path / "LJSpeech-1.1")
    before = sorted(p.relative_to(data) for p in data.rglob("*"))
    out, result = fine_tune(tmp_path, data)
    assert (
        f"tpu_demo: dataset {data / 'metadata.csv'}: LJSpeech, audio in {data / 'wavs'}: 2 recordings" in result.stdout
    )
    assert summary(out)["data"].startswith(f"{data}: 2 samples, 2 encoded")
    assert "tpu_demo: text [-]: 2 transcripts, 1.00 UTF-8 bytes (Dia tokens) per character" in result.stdout
    assert sorted(p.relative_to(data) for p in data.rglob("*")) == before  # nothing written beside the recordings


def test_audio_dir_is_refused_where_nothing_reads_it(tmp_path):
    from tpu_demo.config.arguments import DataArguments
    from tpu_demo.data.training_set import training_data
    from tpu_demo.model.dia import tiny_config

    with pytest.raises(FineTuneError, match="audio_dir: set, but dataset synthetic is not a manifest of recordings"):
        training_data(DataArguments(audio_dir=str(tmp_path)), tiny_config(), tmp_path / "out", 0)


@bug_on_unpatched
def test_a_datasets_test_split_is_the_held_out_set(tmp_path):
    datasets = pytest.importorskip("datasets", reason="a `datasets` folder needs the datasets package")

    def table(count, offset):
        clips = [
            str(wav(tmp_path / "made" / f"{offset + i}.wav", pitch=200.0 + 40 * (offset + i))) for i in range(count)
        ]
        texts = [f"[S1] clip {offset + i}" for i in range(count)]
        return datasets.Dataset.from_dict({"audio": clips, "text": texts}).cast_column("audio", datasets.Audio())

    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": table(4, 0), "test": table(3, 10)}).save_to_disk(str(saved))
    out, result = fine_tune(tmp_path, saved, eval_samples=2)
    assert (
        f"tpu_demo: dataset {saved}: a `datasets` folder, 3 held out by its test split: 7 recordings" in result.stdout
    )
    chosen = json.loads((out / "split.json").read_text())  # samples in the data's order: train 0-3, then test
    assert chosen["train"] == [0, 1, 2, 3] and len(chosen["eval"]) == 2 and set(chosen["eval"]) <= {4, 5, 6}
    assert summary(out)["eval_samples"] == 2


@pytest.mark.parametrize(
    "content, message",
    [
        (b'\xef\xbb\xbf{"file_name": "a.wav", "text": "Hi"}\n', None),  # a BOM, as Windows editors write it
        (b'{"file_name": "a.wav", "text": "Hi",}\n', r"metadata.jsonl, line 1: not JSON"),
    ],
)
def test_an_audiofolder_metadata_jsonl_is_never_taken_for_codes(tmp_path, content, message):
    # its first line not being JSON made the folder a folder of codes, and the codes' reader a traceback
    from tpu_demo.config.arguments import DataArguments
    from tpu_demo.data.training_set import training_data
    from tpu_demo.model.dia import tiny_config

    wav(tmp_path / "data/a.wav")
    (tmp_path / "data/metadata.jsonl").write_bytes(content)
    if message is None:
        assert read(tmp_path / "data").rows[0].text == "Hi"
        return
    with pytest.raises(FineTuneError, match=message):
        training_data(DataArguments(dataset=str(tmp_path / "data")), tiny_config(), tmp_path / "out", 0)


def test_a_manifest_that_is_not_utf8_or_not_a_manifest_is_named(tmp_path):
    wav(tmp_path / "a.wav")
    (tmp_path / "latin1.csv").write_bytes("audio,text\na.wav,Café\n".encode("latin-1"))
    with pytest.raises(
        FineTuneError, match=r"latin1.csv: not UTF-8 text \(byte 0xe9 at offset 20\); save it as UTF-8"
    ):
        read(tmp_path / "latin1.csv")
    with pytest.raises(FineTuneError, match=r"a.wav is a recording: give the manifest \(or folder\) that lists it"):
        read(tmp_path / "a.wav")


def test_a_codec_or_model_path_that_is_not_there_is_not_a_hub_error(tmp_path):
    from tpu_demo.config.arguments import ModelArguments
    from tpu_demo.data.audio import Codec
    from tpu_demo.model.dia import build_model, model_config

    with pytest.raises(FineTuneError, match=f"^codec {tmp_path}/nocodec: no such folder$"):
        Codec(str(tmp_path / "nocodec"))
    for load in (build_model, model_config):
        with pytest.raises(FineTuneError, match=r"^model \./no_dia: no such folder$"):
            load(ModelArguments(model="./no_dia"))
