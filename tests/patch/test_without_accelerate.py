"""Where accelerate is not installed, the upstream test file still imports and every test skips with its reason."""

import importlib.util
import subprocess
import sys

import pytest

from tests.upstream_layout import assemble


@pytest.mark.skipif(importlib.util.find_spec("accelerate") is not None, reason="accelerate is installed here")
def test_upstream_file_skips_without_accelerate(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--rootdir", str(tmp_path)]
    cmd += ["tests/trainer/test_training_args_accelerator_state.py", "tests/trainer/distributed"]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=assemble(tmp_path))
    summary = result.stdout.splitlines()[-1]
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "skipped" in summary and "passed" not in summary and "error" not in summary, summary
    reasons = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert reasons and all("accelerate" in line for line in reasons), reasons
