"""Upstream's ruff on the files the series touches, in a prepared tree, as upstream's CI runs it.

    python -m harness.upstream_lint TREE

The release archive holds no `tests/__init__.py` (upstream's repository does, which makes `tests` a first-party
package to ruff's import sorting): the packages the PR's tests live in are made as upstream has them.
"""

import subprocess
import sys
from pathlib import Path

from harness.make_patches import UPSTREAM_TESTS, load_edit

PACKAGES = ("tests", "tests/trainer", "tests/trainer/distributed")


def main(argv=None) -> int:
    tree = Path((argv or sys.argv[1:])[0])
    for package in PACKAGES:
        (tree / package / "__init__.py").touch()
    files = [*load_edit().FILES, *UPSTREAM_TESTS]
    check = subprocess.call(["ruff", "check", *files], cwd=tree)
    return check or subprocess.call(["ruff", "format", "--check", *files], cwd=tree)


if __name__ == "__main__":
    sys.exit(main())
