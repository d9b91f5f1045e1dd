"""The test file the upstream PR adds passes on the patched release and fails on the published one."""

import subprocess
import sys

from tests.testing_utils import PATCHED, ROOT, launch_env

UPSTREAM_TEST = ROOT / "patches/src/test_training_args_accelerator_state.py"


def test_upstream_test_file(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", "--rootdir", str(tmp_path)]
    result = subprocess.run([*cmd, str(UPSTREAM_TEST)], env=launch_env(), capture_output=True, text=True, cwd=tmp_path)
    summary = result.stdout.splitlines()[-1]
    if PATCHED:
        assert result.returncode == 0, result.stdout[-4000:]
        assert "passed" in summary and "failed" not in summary
        cases = int(summary.split(" passed")[0].split()[-1])
        assert f"{cases} cases" in (ROOT / "docs/PULL_REQUEST.md").read_text(), summary
    else:
        assert result.returncode == 1, result.stdout[-4000:]
        failed = {
            line.split(" - ")[0].rsplit("::", 1)[-1]
            for line in result.stdout.splitlines()
            if line.startswith("FAILED ")
        }
        assert {"test_matching_state_0_accelerator", "test_accelerator_survives_trainer"} <= failed
