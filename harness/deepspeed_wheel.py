"""Installs DeepSpeed with the CPU ops that the launched tests load, each set of ops compiled once.

    python -m harness.deepspeed_wheel [VERSION WHEELS_DIR]

Without arguments: the env's DEEPSPEED_VERSION and DEEPSPEED_WHEELS (tox.ini sets both for patched and unpatched, so
`tox exec -e unpatched -- python -m harness.deepspeed_wheel` builds what the run will install).

pip's wheel cache keys a source build by its archive alone: a DeepSpeed built earlier with other `DS_BUILD_*`
variables, or against another torch, would be installed as it is. So the wheel is built without that cache, once,
into a folder of WHEELS_DIR named by the variables and the torch it is built against; the other env installs it.
"""

import hashlib
import os
import shutil
import subprocess
import sys
from importlib.metadata import version as installed_version
from pathlib import Path


def build_key(environ=os.environ) -> str:
    """What the compiled ops depend on: the `DS_BUILD_*` variables and the torch they are built against."""
    settings = sorted(f"{name}={value}" for name, value in environ.items() if name.startswith("DS_BUILD_"))
    python = "python=={}.{}".format(*sys.version_info[:2])
    return " ".join([python, f"torch=={installed_version('torch')}", *settings])


def wheel_folder(wheels: Path, deepspeed: str, key: str) -> Path:
    return wheels / f"deepspeed-{deepspeed}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def main(argv: list[str]) -> int:
    deepspeed, wheels = argv or (os.environ["DEEPSPEED_VERSION"], os.environ["DEEPSPEED_WHEELS"])
    key = build_key()
    folder = wheel_folder(Path(wheels), deepspeed, key)
    pip = [sys.executable, "-m", "pip"]
    if not any(folder.glob("deepspeed-*.whl")):
        print(f"harness.deepspeed_wheel: building deepspeed {deepspeed} ({key}) into {folder}", flush=True)
        for left in folder.parent.glob(f"{folder.name}.partial-*"):  # a build killed half-way
            if not alive(int(left.name.rsplit("-", 1)[1])):
                shutil.rmtree(left)
        partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")  # envs run side by side (`tox -p`)
        build = ["wheel", "--no-build-isolation", "--no-deps", "--no-cache-dir", "-w", str(partial)]
        subprocess.run([*pip, *build, f"deepspeed=={deepspeed}"], check=True)
        try:
            partial.rename(folder)  # whole, or not there: a build killed half-way is done again
        except OSError:  # another env's build of the same got there first
            if not any(folder.glob("deepspeed-*.whl")):
                raise
            shutil.rmtree(partial)
    (wheel,) = folder.glob("deepspeed-*.whl")
    # an env that holds a DeepSpeed built otherwise gets this one
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--force-reinstall", str(wheel)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
