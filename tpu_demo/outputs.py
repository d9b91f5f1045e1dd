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


def settings_path(output_dir) -> Path:
    """The run's settings that `tpu_demo.generate` reuses for its defaults (`run_settings`)."""
    return Path(output_dir) / "settings.json"


def run_settings(config) -> dict:
    """What generating from the run reuses: the longest audio it trained on (frames: longer clips were dropped or cut)
    and the speaker model it compared voices with (a folder made absolute: generate may run from elsewhere)."""
    speaker_model = config.evaluation.eval_speaker_model
    if speaker_model and Path(speaker_model).expanduser().is_dir():
        speaker_model = str(Path(speaker_model).expanduser().resolve())
    return {"max_audio_frames": config.data.max_audio_frames, "eval_speaker_model": speaker_model}
