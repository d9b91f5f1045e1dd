"""The data a run trains on: recordings encoded to codes (once, cached), pre-computed codes, or a synthetic set.
Every process calls `training_data`: the main process encodes while the others wait, or each encodes its share."""

import json
from pathlib import Path

from accelerate import PartialState
from accelerate.utils import DistributedType, gather_object
from tqdm.auto import tqdm
from transformers import DiaTokenizer

from tpu_demo.cli import say
from tpu_demo.data.codes import CodesDataset, write_synthetic
from tpu_demo.data.languages import text_report
from tpu_demo.errors import FineTuneError
from tpu_demo.model.tokens import CODEBOOK_SIZE


def codec_matches_model(codec, model_config, model=None) -> None:
    """Refuses, before any encoding, a codec whose codes the model cannot read or whose rate its processor does not."""
    channels = model_config.decoder_config.num_channels
    if codec.num_codebooks != channels:
        raise FineTuneError(f"codec has {codec.num_codebooks} codebooks but the model reads {channels} channels")
    if codec.model.config.codebook_size > CODEBOOK_SIZE:
        size = codec.model.config.codebook_size
        raise FineTuneError(f"codec codebook size {size} exceeds Dia's {CODEBOOK_SIZE} audio codes")
    processor_config = Path(model or "", "preprocessor_config.json")  # a local Dia folder's own processor
    if model and processor_config.is_file():
        rate = json.loads(processor_config.read_text()).get("sampling_rate")
        if rate and rate != codec.sampling_rate:
            raise FineTuneError(f"codec samples at {codec.sampling_rate} Hz but the model's processor at {rate} Hz")


def training_data(data_args, model_config, output_dir, seed, model=None) -> CodesDataset:
    """The dataset `data_args.dataset` names; every process must call it (it synchronises them)."""
    state = PartialState()
    channels = model_config.decoder_config.num_channels
    source = data_args.dataset
    path = Path(source)
    saved_dataset = (path / "dataset_info.json").is_file() or (path / "dataset_dict.json").is_file()
    codes = codes_folder(path)
    if data_args.audio_dir and (source == "synthetic" or saved_dataset or codes):
        raise FineTuneError(f"audio_dir: set, but dataset {source} is not a manifest of recordings")
    if source == "synthetic":
        folder = Path(output_dir) / "synthetic"
        with state.main_process_first():
            if state.is_main_process and not (folder / "metadata.jsonl").is_file():
                write_synthetic(folder, data_args.synthetic_samples, num_channels=channels, seed=seed)
        return CodesDataset(folder, num_channels=channels)
    if codes:
        return CodesDataset(path, num_channels=channels)
    if not path.exists():
        where = (
            ""
            if path.is_absolute()
            else f" as {path.absolute()} (a relative path is read from the folder the run started in)"
        )
        raise FineTuneError(f"dataset {source}: no such manifest or folder{where}; or use `dataset: synthetic`")
    rows = recording_rows(path, data_args, saved_dataset, state)
    if not data_args.codec:
        raise FineTuneError(f"dataset {source} holds recordings: set `codec` to a DacModel folder or hub id")
    cache_dir = Path(data_args.cache_dir or Path(output_dir) / "audio_codes")
    prepared = encoded(rows, data_args, model_config, model, cache_dir, state)
    if state.is_main_process:
        say(prepared.summary(), flush=True)
    description = f"{source}: {prepared.summary()}"
    return CodesDataset(cache_dir, items=prepared.items, num_channels=channels, description=description)


def recording_rows(path: Path, data_args, saved_dataset: bool, state) -> list:
    """The rows of a saved `datasets` folder or a manifest of recordings, told to the user with a report of texts."""
    from tpu_demo.data.audio import read_saved_dataset
    from tpu_demo.data.layouts import read_recordings

    if saved_dataset:
        rows = read_saved_dataset(path)
        test = sum(row.held_out for row in rows)
        layout = f"{path}: a `datasets` folder" + (f", {test} held out by its test split" if test else "")
    else:
        recordings = read_recordings(path, data_args.audio_dir)
        layout, rows = recordings.layout, recordings.rows
    if state.is_main_process:
        say(f"dataset {layout}: {len(rows)} recordings", flush=True)
        for line in text_report(rows, DiaTokenizer(), data_args.max_text_tokens):
            say(line, flush=True)
    return rows


def encoded(rows: list, data_args, model_config, model, cache_dir: Path, state):
    """The rows encoded by the codec into `cache_dir` (what it holds already is read, not encoded again)."""
    from tpu_demo.data.audio import Codec, prepare

    codec = Codec(data_args.codec, device=encoding_device(state))
    codec_matches_model(codec, model_config, model)
    progress = (lambda it: tqdm(it, desc="encoding audio", unit="file")) if state.is_main_process else None
    settings = (data_args.max_audio_frames, data_args.too_long)
    if state.num_processes > 1 and state.distributed_type != DistributedType.XLA:
        # every process encodes its share of what the cache lacks, then all read the whole cache
        share = prepare(rows[state.process_index :: state.num_processes], codec, cache_dir, *settings, progress,
                        data_args.max_text_tokens, require_items=False)  # fmt: skip
        say(f"process {state.process_index} encoded {share.encoded} recordings", flush=True)
        parts = gather_object([share])
        prepared = prepare(rows, codec, cache_dir, *settings, None, data_args.max_text_tokens)
        prepared.add_encoding_of(parts)
        return prepared
    # on XLA the main process encodes on the host (gather_object has no XLA implementation)
    with state.main_process_first():
        return prepare(rows, codec, cache_dir, *settings, progress, data_args.max_text_tokens)


def encoding_device(state) -> str:
    """Where the codec runs: the process's GPU when there is one; else (CPU, and XLA, which would compile a graph per
    clip length) the host CPU."""
    return str(state.device) if state.device.type == "cuda" else "cpu"


def codes_folder(path: Path) -> bool:
    """A folder of pre-computed codes: its metadata.jsonl lists code files (an audiofolder's lists recordings)."""
    metadata = path / "metadata.jsonl"
    if not metadata.is_file():
        return False
    first = next((line for line in metadata.read_bytes().splitlines() if line.strip()), b"{}")
    try:
        return "file" in json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False  # read as a manifest of recordings, which names the line
