"""The package's one exception. Each command's `main()` turns it into its exit message; library code only raises."""

from tpu_demo.compat import LOAD_ERRORS  # noqa: F401 (what from_pretrained raises differs per release line)


class FineTuneError(Exception):
    """Something the user must change (a setting, a file, a checkpoint), said in words they can act on."""


def require_folder(key: str, name: str) -> None:
    """A `name` written as a path (absolute, or starting with . or ~) must be a folder here: transformers would try
    it as a hub id and answer with a hub error."""
    from pathlib import Path

    if name.startswith(("/", ".", "~")) and not Path(name).expanduser().is_dir():
        raise FineTuneError(f"{key} {name}: no such folder")


def hub_unreachable(error: BaseException) -> str | None:
    """Why `from_pretrained` could not fetch a hub id, when that is why it failed: offline by setting, or no
    connection (huggingface_hub's LocalEntryNotFoundError, somewhere under transformers' OSError); None otherwise."""
    from huggingface_hub import constants
    from huggingface_hub.errors import LocalEntryNotFoundError

    while error is not None and not isinstance(error, LocalEntryNotFoundError):
        error = error.__cause__ or error.__context__
    if error is None:
        return None
    return "the hub is offline (HF_HUB_OFFLINE is set)" if constants.HF_HUB_OFFLINE else "the hub is unreachable"
