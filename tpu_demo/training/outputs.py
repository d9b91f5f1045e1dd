"""Where a run writes what, named in one place: checkpoints and samples in `step-N` folders, `prompt-K` samples."""

from pathlib import Path


def step_name(step) -> str:
    return f"step-{step}"


def prompt_name(number) -> str:
    return f"prompt-{number}"


def checkpoint_dir(output_dir, step) -> Path:
    return Path(output_dir) / "checkpoints" / step_name(step)


def sample_path(output_dir, step, number) -> Path:
    return Path(output_dir) / "samples" / step_name(step) / f"{prompt_name(number)}.wav"


def step_dirs(folder) -> list[Path]:
    """The `step-N` folders in `folder` (checkpoints, samples), in step order."""
    return sorted(Path(folder).glob(step_name("*")), key=lambda p: int(p.name[len(step_name("")) :]))
