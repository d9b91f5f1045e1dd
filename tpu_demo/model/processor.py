"""Dia's `DiaProcessor` (tokenizer, feature extractor, codec) saved beside a fine-tuned model and loaded back."""

from pathlib import Path

from tpu_demo.errors import LOAD_ERRORS, FineTuneError


def save_processor(codec_name_or_path: str, final_dir) -> None:
    """Writes the `DiaProcessor` next to the fine-tuned model: tokenizer, feature extractor at the codec's rate and
    the codec. transformers stores the codec as a reference, so a local codec is copied into `final/codec` first and
    referenced there (`DiaProcessor.from_pretrained(final)` then needs no other file, while `final` stays put); so is
    `codec: tiny`'s random codec."""
    import shutil

    from transformers import DacModel

    from tpu_demo.model.dia import TINY_CODEC, load_codec

    final_dir = Path(final_dir)
    source = Path(codec_name_or_path)
    if codec_name_or_path == TINY_CODEC:
        load_codec(TINY_CODEC).save_pretrained(final_dir / "codec")
        codec_name_or_path = str((final_dir / "codec").resolve())
    elif source.is_dir():
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
