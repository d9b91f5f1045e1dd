"""The reproduction script from the bug report, unchanged, with default settings."""

import subprocess
import sys

import pytest

from harness.scenarios import POLICY_ENV
from tests.testing_utils import PATCHED, SCRIPTS, TF_VERSION, launch_env

EXPECTED = "Before: True\nValue: DistributedType.NO\nAfter: True\nValue: DistributedType.NO\n"
ACTUAL_BUG = "Before: True\nValue: DistributedType.NO\nAfter: False\nValue: NOT_FOUND\n"


@pytest.mark.skipif(TF_VERSION < (4, 50), reason="the script calls TrainingArguments() without output_dir (4.50+)")
def test_seed_script_prints_expected_output(tmp_path):
    env = {k: v for k, v in launch_env().items() if k != POLICY_ENV}
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / "seed_reproduction.py")], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (EXPECTED if PATCHED else ACTUAL_BUG)
