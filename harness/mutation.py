"""Mutation score of the fix against the PR's own in-process tests (mutmut 2 and its `--use-patch-file`).

    python -m harness.mutation [VERSION] [--min-score 90] [--workdir DIR]

Prepares the patched tree of VERSION (default: the newest pin), puts the PR's tests in upstream's layout into it and
has mutmut mutate only the lines the fix adds to `training_args.py`, `trainer.py` and `trainer_pt_utils.py`. Each
mutant runs the in-process test file (`pytest -x`) with the tree's `src/` first on the path. Prints the score and
every surviving mutant's diff; exits 1 below the minimum score (killed / all, timeouts counted as killed).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.check_patch import CONFIG, TRAINER, TRAINING_ARGS
from harness.pins import newest, series
from harness.tree import prepare
from tests.upstream_layout import assemble

IN_PROCESS = "tests/trainer/test_training_args_accelerator_state.py"


def mutmut(tree: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)])}
    cmd = [sys.executable, "-m", "mutmut", *args]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, check=check)


def run(version: str, workdir: Path) -> tuple[int, int, list[str]]:
    """(killed, total, the diffs of surviving mutants)."""
    tree = prepare(version, workdir / "transformers")
    assemble(tree)
    fix = workdir / "fix.patch"
    fix.write_text(series(version)[0].read_text())
    runner = f"{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:randomly {IN_PROCESS}"
    paths = ",".join([TRAINING_ARGS, TRAINER, CONFIG])
    args = ["run", "--paths-to-mutate", paths, "--use-patch-file", str(fix), "--runner", runner]
    args += ["--tests-dir", "tests/trainer", "--no-progress", "--simple-output", "-m", "4"]
    ran = mutmut(tree, *args)
    if "Checking mutants" not in ran.stdout:  # the baseline failed, or mutmut could not start
        raise SystemExit(f"harness.mutation: mutmut did not get to the mutants:\n{(ran.stdout + ran.stderr)[-3000:]}")
    results = mutmut(tree, "results").stdout
    survived = [mutant for section, ids in _sections(results) if section.startswith("Survived") for mutant in ids]
    suspicious = [mutant for section, ids in _sections(results) if section.startswith("Suspicious") for mutant in ids]
    # `results` lists every mutant but the killed ones (timeouts count as killed): those are counted by their ids
    total = len(mutmut(tree, "result-ids", "killed").stdout.split()) + sum(len(ids) for _, ids in _sections(results))
    diffs = [mutmut(tree, "show", mutant).stdout for mutant in survived + suspicious]
    return total - len(survived) - len(suspicious), total, diffs


def _sections(results: str) -> list[tuple[str, list[str]]]:
    """`mutmut results`: a heading per status ("Survived 🙁 (3)"), then lines of mutant ids and ranges ("4-6, 9")."""
    sections = []
    for line in results.splitlines():
        if re.match(r"^(Killed|Timed out|Suspicious|Survived|Untested|Skipped)", line):
            sections.append((line, []))
        elif sections and re.fullmatch(r"[\d, -]+", line.strip() or "x"):
            for part in line.replace(" ", "").split(","):
                first, _, last = part.partition("-")
                sections[-1][1].extend(str(i) for i in range(int(first), int(last or first) + 1))
    return sections


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.mutation", description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", default=newest())
    parser.add_argument("--min-score", type=float, default=90.0)
    parser.add_argument("--workdir", type=Path, help="keep the tree and mutmut's cache here (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        killed, total, diffs = run(args.version, args.workdir or Path(tmp))
    for diff in diffs:
        print(diff)
    score = 100 * killed / total if total else 0.0
    print(f"harness.mutation: transformers {args.version}: {killed} of {total} mutants killed ({score:.1f}%)")
    return 0 if total and score >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
