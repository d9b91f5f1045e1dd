"""Checks that a series is minimal: each patch touches only its own files, removes no upstream line, and the fix adds
at most `BUDGET` lines to `training_args.py` and `trainer.py` together.

python -m harness.check_patch [VERSION]
"""

import argparse
import subprocess
import sys
from pathlib import Path

from harness.archives import TreeError
from harness.pins import newest, series
from harness.tree import touched_files

TRAINING_ARGS, TRAINER = "src/transformers/training_args.py", "src/transformers/trainer.py"
CONFIG = "src/transformers/trainer_pt_utils.py"  # `AcceleratorConfig`, where the switch is a key
UPSTREAM_TESTS = [
    "tests/trainer/distributed/scripts/accelerator_then_arguments.py",
    "tests/trainer/distributed/test_trainer_distributed_accelerator_state.py",
    "tests/trainer/test_training_args_accelerator_state.py",
]
FILES = [[CONFIG, TRAINER, TRAINING_ARGS], UPSTREAM_TESTS]
# lines the fix may add to `training_args.py` and `trainer.py` together, blank lines, comments and docstrings included
BUDGET = 80


def file_diffs(patch_text: str) -> dict[str, list[str]]:
    """The changed lines (`+...`/`-...`) of each file a patch touches, past its commit message."""
    diffs, current = {}, None
    for line in patch_text[patch_text.index("\ndiff --git ") :].splitlines():
        if line.startswith("diff --git "):
            current = diffs.setdefault(line.split(" b/", 1)[1], [])
        elif line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            current.append(line)
    return diffs


def removed_lines(patch_text: str, path: str | None = None) -> list[str]:
    """The upstream lines a patch drops: a line it only re-indents (into a `try`), or an import it only extends by a
    name, is kept."""
    diffs = file_diffs(patch_text)
    removed = []
    for name in [path] if path else diffs:
        added = [line[1:].strip() for line in diffs.get(name, []) if line[0] == "+"]
        for line in (line[1:].strip() for line in diffs.get(name, []) if line[0] == "-"):
            extended = line.startswith("from ") and any(other.startswith(line + ", ") for other in added)
            if line not in added and not extended:
                removed.append(line)
    return removed


def added_lines(patch_text: str, paths: tuple[str, ...] = (TRAINING_ARGS, TRAINER)) -> int:
    return sum(line[0] == "+" for path in paths for line in file_diffs(patch_text).get(path, []))


def check(patches: list[Path]) -> list[str]:
    """What makes the series `patches` (the fix, then its tests) more than minimal; empty when nothing does."""
    problems = []
    if len(patches) != len(FILES):
        return [f"expected {len(FILES)} patches, found {len(patches)}"]
    for patch, expected in zip(patches, FILES, strict=True):
        touched = touched_files(patch)
        if not set(touched) <= set(expected) or expected[-1] not in touched:
            problems.append(f"{patch.name}: touches {touched}, expected {expected}")
    fix = patches[0].read_text()
    removed = removed_lines(fix)
    if removed:
        problems.append(f"{patches[0].name}: removes upstream lines: {removed}")
    if added_lines(fix) > BUDGET:
        problems.append(
            f"{patches[0].name}: adds {added_lines(fix)} lines to training_args.py and trainer.py, more than {BUDGET}"
        )
    if removed_lines(patches[1].read_text()):
        problems.append(f"{patches[1].name}: removes lines; it should only add the test file")
    return problems


def numbers(version: str) -> str:
    """The figures `docs/PULL_REQUEST.md` states, from the series of `version` (its test cases are pytest's count)."""
    fix, tests = (patch.read_text() for patch in series(version))
    methods = sum(line.startswith("+    def test_") for line in tests.splitlines())
    added = {path.rsplit("/", 1)[1]: added_lines(fix, (path,)) for path in (TRAINING_ARGS, TRAINER, CONFIG)}
    return "\n".join(
        [
            f"- `training_args.py` +{added['training_args.py']}, `trainer.py` +{added['trainer.py']},"
            f" `trainer_pt_utils.py` +{added['trainer_pt_utils.py']} (the key, documented, validated); no upstream"
            " line dropped (the `Trainer`'s call re-indented into a `try`, `Literal` added to an import).",
            f"- Tests: {methods} test methods; on a CPU-only host CASES cases pass, the others need accelerators.",
        ]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.check_patch", description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", default=newest())
    version = parser.parse_args(argv).version
    stat = subprocess.run(["git", "apply", "--stat", *map(str, series(version))], capture_output=True, text=True)
    print(f"patches/{version} diffstat:\n{stat.stdout.rstrip()}")
    added = added_lines(series(version)[0].read_text())
    print(f"lines added to training_args.py and trainer.py: {added} (budget {BUDGET})")
    problems = check(series(version))
    for problem in problems:
        print(f"NOT MINIMAL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TreeError as error:
        sys.exit(f"harness.tree: {error}")
