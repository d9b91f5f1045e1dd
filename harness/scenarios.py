"""The scenarios of an accelerator state made before `TrainingArguments`, one vocabulary for the tests and the report.

A scenario is a value of `accelerator_state_policy` (or none: `default`), a way to make the state, and a set of
arguments. `promised` says what the patched release does with the state (what the published one does, unpatched);
the tests `record` what they saw in `$SCENARIO_LOG` and `harness.matrix_report` reads it back with `load`.
"""

import itertools
import json
import os
from pathlib import Path

POLICY_FIELD = "accelerator_state_policy"
POLICIES = ("auto", "preserve", "reset")
DEFAULT = "default"  # the policy left unset: the field's default (`auto`), as most programs run


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


def promised(policy: str, arguments: str, device_type: str, patched: bool = True) -> str:
    """What the patched release does with the state (with `patched=False`: what the published one does)."""
    if arguments == "use_configured_state":
        return "kept"  # the upstream opt-in, unchanged by the patch
    if not patched or policy == "reset":
        return "reset"
    # a fresh state for `use_cpu=True` runs on the CPU, but where torch_xla is importable accelerate builds an XLA
    # state whatever `cpu` says (the published release's arguments run on `xla:0` too)
    if arguments == "use_cpu" and device_type not in ("cpu", "xla"):
        return "error" if policy == "preserve" else "reset"
    return "kept"


def record(kind: str, **fields) -> None:
    """Appends one line to `$SCENARIO_LOG` (JSON lines; nothing without the variable). `kind` is "scenario" (policy,
    state, arguments, device, outcome) or "suite" (pytest's counts for the env)."""
    path = os.environ.get("SCENARIO_LOG")
    if not path:
        return
    import transformers

    patched = POLICY_FIELD in transformers.TrainingArguments.__dataclass_fields__
    fields = {"kind": kind, **fields, "transformers": transformers.__version__, "patched": patched}
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
