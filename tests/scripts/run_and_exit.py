"""Runs a launched program, then leaves as the suite's own launched programs do (`launched_exit`).

    run_and_exit.py PROGRAM [ARGUMENTS ...]

For a program that is not ours (the upstream PR's): what it does is unchanged; only the interpreter's teardown,
where gloo's threads abort a finished rank under load, is skipped; under `--use_fsdp`, FSDP is set up on CPU
processes as accelerate sets it up on GPUs (`fsdp_on_cpu`).
"""

import os
import runpy
import sys

from fsdp_on_cpu import build_fsdp_on_cpu
from launched_exit import exit_after_report

if os.environ.get("ACCELERATE_USE_FSDP") == "true":  # as on GPUs: accelerate sets FSDP up for GPU kinds only
    build_fsdp_on_cpu()
program, *arguments = sys.argv[1:]
sys.argv = [program, *arguments]
runpy.run_path(program, run_name="__main__")
exit_after_report()
