"""The scenarios of an accelerator state made before `TrainingArguments`, one vocabulary for the tests and the report.

A scenario is a value of `accelerator_config`'s `existing_state` (or none: `default`), a way to make the state, and a
set of arguments. `promised` says what the patched release does with the state (what the published one does,
unpatched); the tests `record` what they saw in `$SCENARIO_LOG` and `harness.matrix_report` reads it back with `load`.
"""

import itertools
import json
import os
from pathlib import Path

POLICY_KEY = "existing_state"  # of `AcceleratorConfig`, where the patched release has the switch
POLICIES = ("auto", "preserve", "reset")
DEFAULT = "default"  # the key left unset: its default (`auto`), as most programs run


def is_patched() -> bool:
    """Whether the installed transformers carries the series (its `AcceleratorConfig` has the switch)."""
    from transformers.trainer_pt_utils import AcceleratorConfig

    return POLICY_KEY in AcceleratorConfig.__dataclass_fields__


def _accelerator():
    from accelerate import Accelerator

    return Accelerator().state


def _cpu_accelerator():
    from accelerate import Accelerator

    return Accelerator(cpu=True).state


def _partial_state():
    from accelerate import PartialState

    return PartialState()


def _accelerator_state():
    # `AcceleratorState()` only builds inside an `Accelerator`; afterwards it is the handle libraries take.
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    Accelerator(mixed_precision="no")
    return AcceleratorState()


STATE_MAKERS = {
    "Accelerator()": _accelerator,
    "Accelerator(cpu=True)": _cpu_accelerator,
    "PartialState()": _partial_state,
    "AcceleratorState()": _accelerator_state,
}


def _accelerator_config_dataclass():
    from transformers.trainer_pt_utils import AcceleratorConfig

    return {"accelerator_config": AcceleratorConfig(split_batches=False)}


ARGUMENT_VARIANTS = {
    "defaults": dict,
    "use_cpu": lambda: {"use_cpu": True},
    "config_dict": lambda: {"accelerator_config": {"split_batches": False}},
    "config_dataclass": _accelerator_config_dataclass,
    "use_configured_state": lambda: {"accelerator_config": {"use_configured_state": True}},
}


def all_scenarios():
    """(policy, state maker, argument variant) for every scenario: 4 x 4 x 5 = 80."""
    return list(itertools.product((DEFAULT, *POLICIES), STATE_MAKERS, ARGUMENT_VARIANTS))


def promised(
    policy: str, arguments: str, state_device: str, patched: bool = True, arguments_device=None, maker=None
) -> str:
    """What the patched release's `TrainingArguments` do with a state on `state_device` made by `maker` (by default
    an `Accelerator`), where fresh arguments would set up `arguments_device` (by default the same: a CPU-only or XLA
    host); with `patched=False`, what the published one does. A `Trainer` compares the rest."""
    if arguments == "use_configured_state":  # the upstream opt-in, unchanged by the patch; "reset" contradicts it
        return "error" if patched and policy == "reset" else "kept"
    if not patched or policy == "reset" or maker == "PartialState()":  # only an `Accelerator`'s state is kept
        return "reset"
    return "kept" if policy == "preserve" or state_device == (arguments_device or state_device) else "reset"


def arguments_device(arguments: dict) -> str:
    """The device type fresh `TrainingArguments(**arguments)` set up on this host: where torch_xla is importable
    accelerate builds an XLA state whatever `cpu` says."""
    import torch
    from accelerate.utils import is_torch_xla_available

    if is_torch_xla_available():
        return "xla"
    return "cpu" if arguments.get("use_cpu") or not torch.cuda.is_available() else "cuda"


def record(kind: str, **fields) -> None:
    """Appends one line to `$SCENARIO_LOG` (JSON lines; nothing without the variable). `kind` is "scenario" (policy,
    state, arguments, device, outcome) or "suite" (pytest's counts for the env)."""
    path = os.environ.get("SCENARIO_LOG")
    if not path:
        return
    import transformers

    fields = {"kind": kind, **fields, "transformers": transformers.__version__, "patched": is_patched()}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(fields) + "\n")


def load(reports: Path) -> list[dict]:
    """Every line of every `*.jsonl` scenario log in `reports`, with the env it came from (the file's name)."""
    return [
        {**json.loads(line), "env": path.stem}
        for path in sorted(reports.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
