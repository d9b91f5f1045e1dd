"""Removes tox envs that no later env of the run needs, when `TOX_PRUNE_ENVS=1` (set by `.ci/run`).

    python -m harness.prune_envs DIR...

The default `tox` list peaks at about 19 GB with every env kept; CI's disk is shared, so each env is removed once
the last env that reads it has run. Without the variable (a developer's `tox`) nothing is removed.
"""

import os
import shutil
import sys
from pathlib import Path


def tree_size(path: Path) -> int:
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main(argv: list[str]) -> int:
    if os.environ.get("TOX_PRUNE_ENVS") != "1":
        return 0
    for arg in argv:
        path = Path(arg)
        if not (path / "pyvenv.cfg").is_file():
            # only ever a virtual environment: a wrong path in tox.ini must not remove anything else
            print(f"harness.prune_envs: {path} is not a virtual environment; left as it is")
            continue
        size = tree_size(path)
        shutil.rmtree(path)
        print(f"harness.prune_envs: removed {path} ({size / 2**30:.1f} GiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
