"""The PR's tests run in upstream's layout (`tests/trainer/...`), which the release archive lacks: `assemble` builds
it in a folder with stand-ins for the upstream modules they import (`trainer_test_utils`, `test_trainer_distributed`:
our own code, same names and signatures) and upstream's own accelerate config files.

`accelerate_configs/*.yaml` and `scripts/ds_config_zero{2,3}.json` are byte-exact copies of huggingface/transformers'
`tests/trainer/distributed/accelerate_configs/` and `tests/trainer/distributed/scripts/`, as stored at commits
34de825520ff (fsdp.yaml), 6ed77209d72d (fsdp2.yaml), 8af4d22a5b47 (ddp.yaml, ds_config_zero3.json), 0f3f0632a387
(deepspeed_zero2.yaml), fd9688a1d075 (deepspeed_zero3.yaml) and b966757c41b6 (ds_config_zero2.json). They target
GPUs; the DeepSpeed ones name their json relative to the repository root, so launch from `root`."""

import shutil
from pathlib import Path

from harness.make_patches import SRC, UPSTREAM_TESTS

HERE = Path(__file__).resolve().parent
STAND_INS = {
    "tests/trainer/trainer_test_utils.py": HERE / "trainer_test_utils.py",
    "tests/trainer/distributed/test_trainer_distributed.py": HERE / "trainer_distributed_paths.py",
}
# upstream's files, copied as they are: {folder in upstream's repository: folder here}
UPSTREAM_FILES = {
    "tests/trainer/distributed/accelerate_configs": HERE / "accelerate_configs",
    "tests/trainer/distributed/scripts": HERE / "scripts",
}


def assemble(root: Path) -> Path:
    """`root/tests/...` as in upstream's repository, with the PR's test files; returns `root`."""
    for package in ("tests", "tests/trainer", "tests/trainer/distributed"):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").touch()
    for path, source in {**STAND_INS, **{path: SRC / name for path, name in UPSTREAM_TESTS.items()}}.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, root / path)
    for folder, source in UPSTREAM_FILES.items():
        shutil.copytree(source, root / folder, dirs_exist_ok=True)
    return root
