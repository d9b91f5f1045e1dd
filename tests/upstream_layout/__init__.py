"""The PR's tests run in upstream's layout (`tests/trainer/...`), which the release archive lacks: `assemble` builds
it in a folder with stand-ins for the upstream modules they import (`trainer_test_utils`, `test_trainer_distributed`:
our own code, same names and signatures) and accelerate config files for CPU processes."""

import shutil
from pathlib import Path

from harness.make_patches import SRC, UPSTREAM_TESTS

HERE = Path(__file__).resolve().parent
STAND_INS = {
    "tests/trainer/trainer_test_utils.py": HERE / "trainer_test_utils.py",
    "tests/trainer/distributed/test_trainer_distributed.py": HERE / "trainer_distributed_paths.py",
}


def assemble(root: Path) -> Path:
    """`root/tests/...` as in upstream's repository, with the PR's test files; returns `root`."""
    for package in ("tests", "tests/trainer", "tests/trainer/distributed"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").touch()
    for path, source in {**STAND_INS, **{path: SRC / name for path, name in UPSTREAM_TESTS.items()}}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / path)
    shutil.copytree(HERE / "accelerate_configs", root / "tests/trainer/distributed/accelerate_configs")
    return root
