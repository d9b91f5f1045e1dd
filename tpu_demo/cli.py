"""What every command shares: a usage error exits 2 (argparse), a failed run exits 1 with one `tpu_demo: ...` line."""

import argparse
import contextlib
import os
import signal
import sys
import threading
from typing import NoReturn

PREFIX = "tpu_demo"


class ConfigParser(argparse.ArgumentParser):
    """Its flags anywhere among the overrides (`launch my.yaml --segment dataset=clips`), not only after them."""

    def parse_args(self, args=None, namespace=None):
        return self.parse_intermixed_args(args, namespace)


def config_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A parser for the commands that read the one YAML config and `key=value` overrides."""
    parser = ConfigParser(prog=prog, description=description)
    parser.add_argument("config", help="YAML file with training and accelerate settings")
    parser.add_argument("overrides", nargs="*", help="key=value settings that replace the file's")
    return parser


def say(message: str, **print_kwargs) -> None:
    """One line of the fine-tuner's own output, prefixed as its errors are."""
    print(f"{PREFIX}: {message}", **print_kwargs)


def fail(error) -> NoReturn:
    """Ends a command whose run failed: its reason in one line on stderr, exit code 1."""
    sys.exit(f"{PREFIX}: {error}")


class Terminated(KeyboardInterrupt):
    """SIGTERM (`kill`, a container's stop, a scheduler's time limit): a run stops as Ctrl-C stops it."""


@contextlib.contextmanager
def terminated_as_interrupted():
    """SIGTERM raises `Terminated` while the block runs: the command's Ctrl-C handling says how to continue."""
    if threading.current_thread() is not threading.main_thread():  # only the main thread may set a handler
        yield
        return

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one (a scheduler's, then the launcher's) is the same
        raise Terminated

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupted_exit_code(interrupt: KeyboardInterrupt) -> int:
    """A shell's code for the signal: 128 + 15 for SIGTERM, 128 + 2 for Ctrl-C."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


def stop_interrupted(interrupt: KeyboardInterrupt, how_to_continue: str) -> NoReturn:
    """Ends a command Ctrl-C or SIGTERM reached in every process of the run: the first process says how to continue."""
    if os.environ.get("RANK", "0") == "0":
        say(f"interrupted; {how_to_continue}", file=sys.stderr)
    sys.exit(interrupted_exit_code(interrupt))


def refuse_unsupported_transformers() -> None:
    """Every command's first step: a transformers the fine-tuner cannot run on ends it in one line, before the
    command imports what that release lacks (Dia)."""
    from tpu_demo.compat import unsupported_transformers

    if reason := unsupported_transformers():
        fail(reason)
