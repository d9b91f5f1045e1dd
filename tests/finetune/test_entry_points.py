"""One rule for every command: a usage error exits 2 with argparse's usage, a failed run exits 1 with one
`tpu_demo: ...` line and no traceback."""

import importlib

import pytest

from tests.demo_utils import run_main
from tests.testing_utils import require_dia

pytestmark = require_dia

COMMANDS = ["launch", "train", "prepare", "generate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_usage_error_exits_2(command):
    result = run_main(importlib.import_module(f"tpu_demo.{command}").main, [])
    assert result.returncode == 2 and "usage:" in result.stderr and f"tpu_demo.{command}: error:" in result.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_failed_run_exits_1_with_one_line(command, tmp_path):
    missing = tmp_path / "missing"  # a config file, or a model folder, that is not there
    argv = [str(missing), "[S1] Hi."] if command == "generate" else [str(missing)]
    result = run_main(importlib.import_module(f"tpu_demo.{command}").main, argv)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("tpu_demo: ") and str(missing) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
