"""Checks that a series is minimal: each patch touches only its own file, and the fix removes no upstream line.

python -m harness.check_patch [VERSION]
"""

import argparse
import subprocess
import sys
from pathlib import Path

from harness.archives import TreeError
from harness.pins import newest, series
from harness.tree import touched_files

FILES = [["src/transformers/training_args.py"], ["tests/trainer/test_training_args_accelerator_state.py"]]


def removed_lines(patch_text: str) -> list[str]:
    diff = patch_text[patch_text.index("\ndiff --git ") :]  # past the commit message
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]


def check(patches: list[Path]) -> list[str]:
    """What makes the series `patches` (the fix, then its tests) more than minimal; empty when nothing does."""
    problems = []
    if len(patches) != len(FILES):
        return [f"expected {len(FILES)} patches, found {len(patches)}"]
    for patch, expected in zip(patches, FILES, strict=True):
        touched = touched_files(patch)
        if touched != expected:
            problems.append(f"{patch.name}: touches {touched}, expected {expected}")
    # The fix only adds lines: today's reset stays, as the `else:` branch after the new `elif`.
    removed = removed_lines(patches[0].read_text())
    if removed:
        problems.append(f"{patches[0].name}: removes upstream lines: {removed}")
    if removed_lines(patches[1].read_text()):
        problems.append(f"{patches[1].name}: removes lines; it should only add the test file")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.check_patch", description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", default=newest())
    version = parser.parse_args(argv).version
    stat = subprocess.run(["git", "apply", "--stat", *map(str, series(version))], capture_output=True, text=True)
    print(f"patches/{version} diffstat:\n{stat.stdout.rstrip()}")
    problems = check(series(version))
    for problem in problems:
        print(f"NOT MINIMAL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TreeError as error:
        sys.exit(f"harness.tree: {error}")
