"""Sharding asked for is sharding done, or the run does not start: accelerate 1.15 turns `--use_fsdp` on CPU
processes into DDP without a word (see the notes), which would train an unsharded model."""

import subprocess
import sys

from tests.demo_utils import CONFIG
from tests.testing_utils import ROOT, free_ports, launch_env, require_dia
from tpu_demo.arguments import LaunchArguments
from tpu_demo.launch import launch_arguments

pytestmark = require_dia


def test_fsdp_that_accelerate_does_not_set_up_is_refused(tmp_path):
    cmd, env = launch_arguments("MULTI_CPU", LaunchArguments(num_processes=2, main_process_port=free_ports()[0]))
    cmd.remove("--multi_gpu")  # accelerate takes one of --multi_gpu and --use_fsdp; CPU processes come from the env
    settings = [f"output_dir={tmp_path / 'run'}", "max_steps=2", "report_to=none"]
    result = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", *cmd, "--use_fsdp", "--fsdp_version", "2",
         "-m", "tpu_demo.train", str(CONFIG), *settings],
        env={**launch_env(), **env}, cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    assert "tpu_demo: FSDP was asked for (ACCELERATE_USE_FSDP), but accelerate set up MULTI_CPU" in result.stderr
    # accelerate's launcher reports the failed child with its own traceback; the program's frames are not in it
    assert not (tmp_path / "run" / "final").exists() and str(ROOT / "tpu_demo") not in result.stderr
