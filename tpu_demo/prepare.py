"""The data a run trains on: recordings encoded to codes (once, cached), pre-computed codes, or a synthetic set.

    python -m tpu_demo.prepare my.yaml [key=value ...]            # only encode the manifest's audio
    accelerate launch -m tpu_demo.prepare my.yaml                # the same, shared by several processes

The main process encodes while the others wait; they then read the cache, so each file is encoded once.
"""

import json
import sys
from pathlib import Path

from accelerate import PartialState
from accelerate.utils import DistributedType, gather_object, parse_flag_from_env
from tqdm.auto import tqdm

from tpu_demo.cli import say
from tpu_demo.data import CodesDataset, write_synthetic
from tpu_demo.errors import LOAD_ERRORS, FineTuneError
from tpu_demo.tokens import CODEBOOK_SIZE


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
        raise FineTuneError(f"dataset {source}: no such manifest or folder (or use `dataset: synthetic`)")
    from tpu_demo.audio import Codec, prepare, read_saved_dataset
    from tpu_demo.layouts import read_recordings

    if saved_dataset:
        rows = read_saved_dataset(path)
        test = sum(row.held_out for row in rows)
        layout = f"{path}: a `datasets` folder" + (f", {test} held out by its test split" if test else "")
    else:
        recordings = read_recordings(path, data_args.audio_dir)
        layout, rows = recordings.layout, recordings.rows
    if state.is_main_process:
        say(f"dataset {layout}: {len(rows)} recordings", flush=True)
    if not data_args.codec:
        raise FineTuneError(f"dataset {source} holds recordings: set `codec` to a DacModel folder or hub id")
    codec = Codec(data_args.codec, device=encoding_device(state))
    codec_matches_model(codec, model_config, model)
    cache_dir = Path(data_args.cache_dir or Path(output_dir) / "audio_codes")
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
    else:  # on XLA the main process encodes on the host (gather_object has no XLA implementation)
        with state.main_process_first():
            prepared = prepare(rows, codec, cache_dir, *settings, progress, data_args.max_text_tokens)
    if state.is_main_process:
        say(prepared.summary(), flush=True)
    description = f"{source}: {prepared.summary()}"
    return CodesDataset(cache_dir, items=prepared.items, num_channels=channels, description=description)


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


def save_processor(codec_name_or_path: str, final_dir) -> None:
    """Writes the `DiaProcessor` next to the fine-tuned model: tokenizer, feature extractor at the codec's rate and
    the codec. transformers stores the codec as a reference, so a local codec is copied into `final/codec` first and
    referenced there (`DiaProcessor.from_pretrained(final)` then needs no other file, while `final` stays put)."""
    import shutil

    from transformers import DacModel

    final_dir = Path(final_dir)
    source = Path(codec_name_or_path)
    if source.is_dir():
        shutil.copytree(source, final_dir / "codec", dirs_exist_ok=True)
        codec_name_or_path = str((final_dir / "codec").resolve())
    dia_processor(DacModel.from_pretrained(codec_name_or_path)).save_pretrained(final_dir)


def load_processor(folder):
    """The `DiaProcessor` in `folder`, asked of transformers (releases save it under different file names). One that
    `save_processor` wrote refers to its codec by the path it was written at; where that no longer resolves (the
    output folder was copied or moved), it is assembled from its parts and the codec copy beside them."""
    from transformers import DacModel, DiaFeatureExtractor, DiaProcessor, DiaTokenizer

    folder = Path(folder)
    try:
        return DiaProcessor.from_pretrained(folder)
    except (*LOAD_ERRORS, TypeError) as error:  # TypeError: a folder of another model's processor
        if not (folder / "codec").is_dir():
            reason = str(error).splitlines()[0]
            raise FineTuneError(f"{folder}: no DiaProcessor transformers can load ({reason})") from None
    return DiaProcessor(
        DiaFeatureExtractor.from_pretrained(folder), DiaTokenizer.from_pretrained(folder),
        DacModel.from_pretrained(folder / "codec"),
    )  # fmt: skip


def dia_processor(codec):
    """A `DiaProcessor` over `codec` (a `DacModel`): Dia's tokenizer, and a feature extractor at the codec's rate."""
    from transformers import DiaFeatureExtractor, DiaProcessor, DiaTokenizer

    extractor = DiaFeatureExtractor(sampling_rate=codec.config.sampling_rate, hop_length=codec.config.hop_length)
    return DiaProcessor(extractor, DiaTokenizer(), codec)


def main(argv=None) -> int:
    from tpu_demo.arguments import load_raw, parse_all
    from tpu_demo.cli import config_parser, fail
    from tpu_demo.model import model_config

    args = config_parser("tpu_demo.prepare", "Encode a config's recordings into the codes cache.").parse_args(argv)
    try:
        raw = load_raw(args.config, args.overrides)
        # before TrainingArguments, as in training; like `Accelerator`, honour `accelerate launch --cpu`'s variable
        PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))
        config = parse_all(raw)
        training = config.training
        dataset = training_data(
            config.data, model_config(config.model), training.output_dir, training.seed, config.model.model
        )
    except FineTuneError as error:
        fail(error)
    say(f"{len(dataset)} samples ready")
    # the process group goes before the interpreter: left to exit, gloo's threads could abort a process ("terminate
    # called without an active exception", rank 1 of a 2-process prepare in CI, transformers 4.53.3 env)
    state = PartialState()
    state.wait_for_everyone()
    state.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
