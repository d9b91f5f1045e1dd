"""What differs between the transformers releases the fine-tuner supports: 4.53 (the first with Dia) and newer."""

from importlib.metadata import PackageNotFoundError, version

from packaging.version import Version

FIRST_SUPPORTED = "4.53.0"  # pyproject.toml's `transformers>=` says the same to pip


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
