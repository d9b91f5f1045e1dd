"""Where accelerate is not installed, the upstream test file still imports and every test skips with its reason."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

UPSTREAM_TEST = Path(__file__).resolve().parents[2] / "patches/src/test_training_args_accelerator_state.py"


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is not None, reason="accelerate is installed here")
def test_upstream_file_skips_without_accelerate(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--rootdir", str(tmp_path)]
    result = subprocess.run([*cmd, str(UPSTREAM_TEST)], capture_output=True, text=True, cwd=tmp_path)
    summary = result.stdout.splitlines()[-1]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "skipped" in summary and "passed" not in summary and "error" not in summary, summary
    reasons = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all("accelerate" in line for line in reasons), reasons
