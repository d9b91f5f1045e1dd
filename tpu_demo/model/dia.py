"""Dia from a local directory of real weights, or a tiny random one built from a config (no hub needed)."""

import torch
from transformers import DacConfig, DiaConfig, DiaForConditionalGeneration
from transformers.models.dia.configuration_dia import DiaDecoderConfig, DiaEncoderConfig

from tpu_demo.compat import dtype_keyword
from tpu_demo.errors import LOAD_ERRORS, FineTuneError, require_folder
from tpu_demo.model.tokens import CODEBOOK_SIZE

DELAY_PATTERN = [0, 8, 9, 10, 11, 12, 13, 14, 15]


def tiny_config(hidden_size: int = 64, layers: int = 2) -> DiaConfig:
    encoder = DiaEncoderConfig(
        num_hidden_layers=layers,
        hidden_size=hidden_size,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=2 * hidden_size,
        vocab_size=256,
    )
    decoder = DiaDecoderConfig(
        num_hidden_layers=layers,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        cross_num_attention_heads=2,
        cross_num_key_value_heads=1,
        cross_head_dim=32,
        cross_hidden_size=hidden_size,
        vocab_size=1028,
        num_channels=len(DELAY_PATTERN),
    )
    return DiaConfig(encoder_config=encoder, decoder_config=decoder, delay_pattern=DELAY_PATTERN)


def dia_1_6b_config(encoder_layers: int | None = None, decoder_layers: int | None = None) -> DiaConfig:
    """The nari-labs/Dia-1.6B(-0626) architecture (its config.json; transformers' `DiaConfig()` defaults), to build
    with random weights without the hub; fewer layers give a cut of it at full width (memory benchmark)."""
    encoder = DiaEncoderConfig(
        num_hidden_layers=12 if encoder_layers is None else encoder_layers,
        hidden_size=1024,
        intermediate_size=4096,
        num_attention_heads=16,
        num_key_value_heads=16,
        head_dim=128,
        max_position_embeddings=1024,
        vocab_size=256,
    )
    decoder = DiaDecoderConfig(
        num_hidden_layers=18 if decoder_layers is None else decoder_layers,
        hidden_size=2048,
        intermediate_size=8192,
        num_attention_heads=16,
        num_key_value_heads=4,
        head_dim=128,
        cross_num_attention_heads=16,
        cross_num_key_value_heads=16,
        cross_head_dim=128,
        cross_hidden_size=1024,
        max_position_embeddings=3072,
        vocab_size=1028,
        num_channels=len(DELAY_PATTERN),
    )
    return DiaConfig(encoder_config=encoder, decoder_config=decoder, delay_pattern=DELAY_PATTERN)


TINY_CODEC = "tiny"  # `codec: tiny`: the random codec below, so a run without the hub can speak (noise)


def load_codec(name_or_path: str):
    """The `DacModel` a `codec` setting names: a folder or hub id, or `tiny` (random, the same weights every time)."""
    from transformers import DacModel

    if name_or_path != TINY_CODEC:
        return DacModel.from_pretrained(name_or_path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return DacModel(tiny_codec_config())


def tiny_codec_config(n_codebooks: int = 9) -> DacConfig:
    """A DAC small enough for tests and the demo (16 kHz, hop 128); real runs use e.g. descript/dac_44khz."""
    return DacConfig(
        encoder_hidden_size=8,
        decoder_hidden_size=16,
        hidden_size=32,
        codebook_dim=4,
        n_codebooks=n_codebooks,
        codebook_size=CODEBOOK_SIZE,
        downsampling_ratios=[2, 4, 4, 4],
        upsampling_ratios=[4, 4, 4, 2],
        sampling_rate=16000,
    )


def model_config(model_args) -> DiaConfig:
    """The configuration `build_model` builds from, without building the weights."""
    if model_args.model:
        require_folder("model", model_args.model)
        return DiaConfig.from_pretrained(model_args.model)
    return tiny_config(model_args.tiny_hidden_size, model_args.tiny_layers)


# Eager attention with masks always built on the device. transformers' mask helpers otherwise ask the host whether a
# padding mask may be skipped (`mask.all()`): a device-to-host transfer in every forward on XLA. Eager, not sdpa:
# under XLA's bf16 autocast sdpa meets mixed dtypes (it is not on XLA's autocast list).
STATIC_MASK_ATTENTION = "eager_static_mask"


def register_static_mask_attention() -> str:
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask
    from transformers.models.dia.modeling_dia import eager_attention_forward

    def static_eager_mask(*args, **kwargs):
        return eager_mask(*args, **{**kwargs, "allow_is_bidirectional_skip": False})

    AttentionInterface.register(STATIC_MASK_ATTENTION, eager_attention_forward)
    AttentionMaskInterface.register(STATIC_MASK_ATTENTION, static_eager_mask)
    return STATIC_MASK_ATTENTION


def dia_layers(model) -> list[torch.nn.Module]:
    """The model's encoder and decoder layers: the units sharding and activation checkpointing work by."""
    from transformers.models.dia.modeling_dia import DiaDecoderLayer, DiaEncoderLayer

    return [m for m in model.modules() if isinstance(m, (DiaEncoderLayer, DiaDecoderLayer))]


def checkpoint_layers_on_xla(model) -> None:
    """Activation checkpointing of every Dia encoder and decoder layer on XLA, where torch's checkpoint looks for a
    `torch.xla` module. torch_xla's `checkpoint_module` passes a layer's keyword arguments to its (reentrant)
    checkpoint positionally, so the gradient a decoder layer sends to the encoder's output is kept."""
    from torch_xla.distributed.fsdp import checkpoint_module

    for layer in dia_layers(model):
        checkpoint_module(layer)


def build_model(model_args, attn_implementation=None) -> DiaForConditionalGeneration:
    """`model` (local folder or hub id) in `dtype`, or the tiny random Dia; `attn_implementation` None: the default."""
    options = {"attn_implementation": attn_implementation} if attn_implementation else {}
    if not model_args.model:
        config = tiny_config(model_args.tiny_hidden_size, model_args.tiny_layers)
        return DiaForConditionalGeneration._from_config(config, **options)
    require_folder("model", model_args.model)
    dtype = getattr(torch, model_args.dtype)
    try:
        return DiaForConditionalGeneration.from_pretrained(model_args.model, **{dtype_keyword(): dtype}, **options)
    except LOAD_ERRORS as error:
        raise FineTuneError(
            f"model {model_args.model}: not a Dia folder in transformers format, nor a hub id that can be "
            f"reached ({str(error).splitlines()[0]})"
        ) from None
