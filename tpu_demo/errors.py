"""The package's one exception. Each command's `main()` turns it into its exit message; library code only raises."""


class FineTuneError(Exception):
    """Something the user must change (a setting, a file, a checkpoint), said in words they can act on."""


# What `from_pretrained` raises for a folder or hub id it cannot load: OSError, and on transformers 4.x also
# huggingface_hub's HFValidationError (a ValueError) for a path that does not exist.
LOAD_ERRORS = (OSError, ValueError)
