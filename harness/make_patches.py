"""Regenerates the committed patch series (one per code family) from the single source in `patches/src/`.

python -m harness.make_patches [VERSION ...]  # rewrite patches/<version>/ for every committed series, or these
python -m harness.make_patches --check        # fail if a committed series differs from what the source gives
"""

import argparse
import difflib
import functools
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.archives import TreeError, fetch_archive
from harness.pins import PATCHES, committed_series, series

SRC = PATCHES / "src"
# the PR's tests, in upstream's layout: {path in transformers: source in patches/src}
UPSTREAM_TESTS = {
    "tests/trainer/test_training_args_accelerator_state.py": "test_training_args_accelerator_state.py",
    "tests/trainer/distributed/test_trainer_distributed_accelerator_state.py": (
        "distributed/test_trainer_distributed_accelerator_state.py"
    ),
    "tests/trainer/distributed/scripts/accelerator_then_arguments.py": "distributed/accelerator_then_arguments.py",
}
IDENTITY = {
    "GIT_AUTHOR_NAME": "accelerate-state-fix",
    "GIT_AUTHOR_EMAIL": "accelerate-state-fix@users.noreply.github.com",
    "GIT_AUTHOR_DATE": "2026-11-21T00:00:00+00:00",
}
IDENTITY |= {key.replace("AUTHOR", "COMMITTER"): value for key, value in IDENTITY.items()}


@functools.cache
def load_edit():
    spec = importlib.util.spec_from_file_location("training_args_edit", SRC / "training_args_edit.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pristine(version: str, member: str) -> str:
    with tarfile.open(fetch_archive(version)) as tar:
        return tar.extractfile(f"transformers-{version}/{member}").read().decode()


def generate(version: str, out: Path) -> list[Path]:
    """Writes the series for `version` into `out` and returns its files."""
    edit = load_edit()
    env = os.environ | IDENTITY

    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)

        def git(*args):
            subprocess.run(["git", "-C", tmp, *args], check=True, capture_output=True, env=env)

        originals = {path: pristine(version, path) for path in edit.FILES}
        (repo / edit.TARGET).parent.mkdir(parents=True)
        for path, text in originals.items():
            (repo / path).write_text(text)
        git("init", "--quiet")
        git("add", ".")
        git("commit", "--quiet", "-m", f"transformers {version}")
        for path, text in edit.edit_all(originals, version).items():
            (repo / path).write_text(text)
        git("commit", "--quiet", "-a", "-F", str(SRC / "0001.msg"))
        for path, source in UPSTREAM_TESTS.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text((SRC / source).read_text())
        git("add", ".")
        git("commit", "--quiet", "-F", str(SRC / "0002.msg"))
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("*.patch"):
            old.unlink()
        git("format-patch", "--quiet", "--zero-commit", "--no-signature", "-2", "-o", str(out))
    return sorted(out.glob("*.patch"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.make_patches", description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*", help="default: every pinned version")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    drift = 0
    for version in args.versions or committed_series():
        if not args.check:
            generate(version, PATCHES / version)
            print(f"patches/{version}: regenerated")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            fresh = {p.name: p.read_text() for p in generate(version, Path(tmp))}
        committed = {p.name: p.read_text() for p in series(version)}
        names = sorted(fresh.keys() | committed.keys())
        differing = [name for name in names if fresh.get(name) != committed.get(name)]
        drift += len(differing)
        for name in differing:
            diff = difflib.unified_diff(
                committed.get(name, "").splitlines(True),
                fresh.get(name, "").splitlines(True),
                f"committed/{version}/{name}",
                f"regenerated/{version}/{name}",
            )
            sys.stdout.writelines(diff)
        print(f"patches/{version}: {'differs from patches/src' if differing else 'up to date'}")
    return 1 if drift else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except TreeError as error:
        sys.exit(f"harness.tree: {error}")
