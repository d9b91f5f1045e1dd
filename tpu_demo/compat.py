"""What differs between the transformers releases the fine-tuner supports: 4.53 (the first with Dia) and newer.
Every workaround for one release line lives here."""

from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

FIRST_SUPPORTED = "4.53.0"  # pyproject.toml's `transformers>=` says the same to pip

# What `from_pretrained` raises for a folder or hub id it cannot load: OSError, and on transformers 4.x also
# huggingface_hub's HFValidationError (a ValueError) for a path that does not exist.
LOAD_ERRORS = (OSError, ValueError)


def unsupported_transformers() -> str | None:
    """Why the installed transformers cannot run the fine-tuner, in one line; None when it can."""
    try:
        installed = version("transformers")
    except PackageNotFoundError:
        return f"transformers is not installed; the fine-tuner needs transformers {FIRST_SUPPORTED} or newer"
    if Version(installed).release < Version(FIRST_SUPPORTED).release:
        return (
            f"transformers {installed} has no Dia; the fine-tuner needs transformers {FIRST_SUPPORTED} or newer "
            "(`python -m harness.tree install` installs the newest, with #40376 fixed)"
        )
    return None


def dtype_keyword() -> str:
    """`from_pretrained`'s name for the weights' dtype: `torch_dtype` until 4.56 renamed it `dtype`."""
    return "dtype" if Version(version("transformers")).release >= (4, 56) else "torch_dtype"


# transformers 5.23 renamed gradient checkpointing to activation checkpointing; the old names warn at every use
def asks_activation_checkpointing(args) -> bool:
    """`activation_checkpointing` (5.23+, mirrored onto `gradient_checkpointing` until v6) or the old name."""
    return bool(getattr(args, "activation_checkpointing", None) or getattr(args, "gradient_checkpointing", False))


def enable_activation_checkpointing(model) -> None:
    """Non-reentrant: the reentrant kind computes no gradients in a block whose inputs need none (frozen embeddings
    under LoRA)."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is None:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    else:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})


def checkpoints_activations(model) -> bool:
    """transformers' flag, or torch_xla's `checkpoint_module` on its layers (which keeps their own forward aside)."""
    if any(hasattr(module, "_xla_checkpointed_forward_original") for module in model.modules()):
        return True
    checkpointing = getattr(model, "is_activation_checkpointing", None)
    return model.is_gradient_checkpointing if checkpointing is None else checkpointing


def name_input_embeddings(model) -> None:
    """accelerate's FSDP2 asks `get_input_embeddings()` for a unit of its own; Dia's raises NotImplementedError (5.23:
    its base model does not say which of its two embeddings). The decoder's, the larger, gets it."""
    try:
        model.get_input_embeddings()
    except NotImplementedError:
        model.get_input_embeddings = lambda: model.model.decoder.embeddings


def sampling_key(raw: dict) -> dict:
    """4.x's `group_by_length: true` and 5.x's `train_sampling_strategy: group_by_length` (or `random`) in the spelling
    of the installed release, so that one config runs on both lines; given both, neither is rewritten (the one the
    release lacks is then refused as unknown)."""
    from transformers import TrainingArguments

    fields, raw = TrainingArguments.__dataclass_fields__, dict(raw)
    if "group_by_length" in raw and "train_sampling_strategy" in raw:
        return raw
    if "train_sampling_strategy" not in fields and raw.get("train_sampling_strategy") in ("random", "group_by_length"):
        raw["group_by_length"] = raw.pop("train_sampling_strategy") == "group_by_length"
    elif "group_by_length" not in fields and isinstance(raw.get("group_by_length"), bool):
        raw["train_sampling_strategy"] = "group_by_length" if raw.pop("group_by_length") else "random"
    return raw


def pads_batches_to_their_longest() -> bool:
    """Whether a batch is padded to its longest clip by default (`length_buckets` unset). Not on 4.x: there a tiny Dia
    trained so regenerated a memorised clip wrongly (4.53.3, tests/finetune/test_memorisation.py; 5.24.0 regenerates
    it), so 4.x trains at the maxima, as before, unless `length_buckets` is set."""
    return Version(version("transformers")).major >= 5
