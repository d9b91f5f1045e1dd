"""The package's one exception. Each command's `main()` turns it into its exit message; library code only raises."""


class FineTuneError(Exception):
    """Something the user must change (a setting, a file, a checkpoint), said in words they can act on."""


# What `from_pretrained` raises for a folder or hub id it cannot load: OSError, and on transformers 4.x also
# huggingface_hub's HFValidationError (a ValueError) for a path that does not exist.
LOAD_ERRORS = (OSError, ValueError)


def require_folder(key: str, name: str) -> None:
    """A `name` written as a path (absolute, or starting with . or ~) must be a folder here: transformers would try
    it as a hub id and answer with a hub error."""
    from pathlib import Path

    if name.startswith(("/", ".", "~")) and not Path(name).expanduser().is_dir():
        raise FineTuneError(f"{key} {name}: no such folder")
