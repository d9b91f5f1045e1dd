"""`python -m harness.tree wheel` gives users the fix before upstream merges: a pip-installable patched release."""

import os
import subprocess
import sys
import zipfile

from harness.pins import newest
from tests.testing_utils import launch_env

# the bug report, with the output_dir that releases before 4.50 need
BUG_REPORT = (
    "from accelerate import Accelerator; from transformers import TrainingArguments; a = Accelerator(); "
    "TrainingArguments(output_dir='out'); print(a.state.distributed_type)"
)


def test_wheel_installs_and_fixes_the_bug_report(tmp_path):
    version = os.environ.get("TF_VERSION", newest())  # the env's release: its dependencies are installed
    build = subprocess.run(
        [sys.executable, "-m", "harness.tree", "wheel", version, "--dest", str(tmp_path / "dist")],
        env=launch_env(),
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name == f"transformers-{version}+accelerator.state-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        assert "existing_state" in archive.read("transformers/trainer_pt_utils.py").decode()
        assert "tests/" not in " ".join(archive.namelist())  # the upstream test file is not shipped

    # Installed on its own (the env's torch and accelerate stay), it is the transformers that gets imported.
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)]
    subprocess.run(install, check=True, capture_output=True)
    env = launch_env(PYTHONPATH=str(site))
    probe = "import transformers; print(transformers.__version__)"
    installed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert installed.stdout.strip() == f"{version}+accelerator.state", installed.stderr[-2000:]
    report = subprocess.run([sys.executable, "-c", BUG_REPORT], env=env, capture_output=True, text=True, cwd=tmp_path)
    assert report.stdout == "DistributedType.NO\n", report.stderr[-2000:]
