"""The package's one exception. Each command's `main()` turns it into its exit message; library code only raises."""


class FineTuneError(Exception):
    """Something the user must change (a setting, a file, a checkpoint), said in words they can act on."""
