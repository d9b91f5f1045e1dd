"""Runs a launched program, then leaves as the suite's own launched programs do (`launched_exit`).

    run_and_exit.py PROGRAM [ARGUMENTS ...]

For a program that is not ours (the upstream PR's): what it does is unchanged; only the interpreter's teardown,
where gloo's threads abort a finished rank under load, is skipped.
"""

import runpy
import sys

from launched_exit import exit_after_report

program, *arguments = sys.argv[1:]
sys.argv = [program, *arguments]
runpy.run_path(program, run_name="__main__")
exit_after_report()
