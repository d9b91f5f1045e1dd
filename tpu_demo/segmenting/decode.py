"""The decode stage: recordings soundfile cannot read (M4A/AAC, video files' audio; read.DECODED) decoded by ffmpeg
to FLAC in the dataset's stage folder, never beside the user's files; done once, again only when the file changes.
"""

import json
import subprocess
from pathlib import Path

from tpu_demo.segmenting.read import DECODED
from tpu_demo.segmenting.settings import PARTS, recording_folder

DECODED_NAME = "decoded.flac"
PROBLEMS = "decode_problems.json"  # the main process's findings, read by the others


def decode_recordings(recordings, out: Path, state) -> dict[str, str]:
    """Each recording ffmpeg reads gets its `audio`: a FLAC of its first audio stream, every channel at its own rate.
    The main process decodes; every process returns those that could not be decoded, with why (by the file's
    path in the recordings folder)."""
    todo = [recording for recording in recordings if recording.path.suffix.lower() in DECODED]
    if not todo:
        return {}
    problems_file = out / PARTS / PROBLEMS
    if state.is_main_process:
        problems = {}
        for recording in todo:
            if problem := decode(recording.path, recording_folder(out, recording.name)):
                problems[recording.name + recording.path.suffix] = problem
        problems_file.parent.mkdir(parents=True, exist_ok=True)
        problems_file.write_text(json.dumps(problems))
    state.wait_for_everyone()
    problems = json.loads(problems_file.read_text())
    for recording in todo:
        recording.audio = recording_folder(out, recording.name) / DECODED_NAME
    return problems


def decode(path: Path, folder: Path) -> str | None:
    """`path` decoded into folder/decoded.flac unless it is there from the same file (size and time); what went
    wrong, else None."""
    target, stamp_file = folder / DECODED_NAME, folder / "decoded.json"
    stat = path.stat()
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    if target.is_file() and stamp_file.is_file() and json.loads(stamp_file.read_text()) == stamp:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / "decoding.flac"  # renamed when whole: an interrupted decoding is never taken for one
    command = ["ffmpeg", "-nostdin", "-hide_banner", "-loglevel", "error", "-y", "-i", str(path)]
    command += ["-map", "0:a:0", "-vn", "-c:a", "flac", str(partial)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        said = [line.strip().replace(str(path), path.name) for line in done.stderr.splitlines() if line.strip()]
        if any("matches no streams" in line for line in said):
            return "ffmpeg finds no audio stream in it"
        return f"ffmpeg cannot decode it ({said[-1] if said else f'exit status {done.returncode}'})"
    partial.replace(target)
    stamp_file.write_text(json.dumps(stamp))
    return None
