"""Runs programs of `harness.differential` in the interpreter that starts it; prints one JSON line per program.

    python harness/differential_worker.py < programs.json

Each program is a list of step names; every program starts from no accelerate state and no accelerate variables.
"""

import dataclasses
import json
import os
import sys
import tempfile

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import TorchDynamoPlugin
from transformers import Trainer, TrainingArguments
from transformers.trainer_pt_utils import AcceleratorConfig
from transformers.utils import logging

logging.set_verbosity_error()
PREFIX = "differential: "  # the Trainer prints its logs to stdout too

MAKERS = {
    "Accelerator()": lambda: Accelerator(),
    "Accelerator(cpu)": lambda: Accelerator(cpu=True),
    "Accelerator(bf16)": lambda: Accelerator(cpu=True, mixed_precision="bf16"),
    "Accelerator(eager)": lambda: Accelerator(cpu=True, dynamo_backend="eager"),
    "PartialState()": lambda: PartialState(),
    # both raise ValueError on this host (no transformer_engine or MS-AMP; no `Accelerator`) after storing part of the
    # state: a half-built state the arguments must not keep
    "Accelerator(fp8)": lambda: Accelerator(cpu=True, mixed_precision="fp8"),
    "AcceleratorState()": lambda: AcceleratorState(),
}
# "Accelerator(dynamo eager fullgraph=True mode=default ...)": a `TorchDynamoPlugin` with those options
DYNAMO = "Accelerator(dynamo "


def dynamo_accelerator(step):
    options = dict(option.split("=", 1) for option in step.removeprefix(DYNAMO).rstrip(")").split()[1:])
    kwargs = {key: value if key == "mode" else value == "True" for key, value in options.items()}
    backend = step.removeprefix(DYNAMO).split()[0]
    return Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend=backend, **kwargs))


ARGUMENTS = {
    "args()": {},
    "args(use_cpu)": {"use_cpu": True},
    "args(bf16)": {"use_cpu": True, "bf16": True},
    "args(compile)": {"use_cpu": True, "torch_compile_backend": "eager"},
    "args(configured)": {"accelerator_config": {"use_configured_state": True}},
    "args(ddp_backend)": {"use_cpu": True, "ddp_backend": "gloo"},
}


class Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(1, 1)

    def forward(self, input_x, labels=None):
        torch._dynamo.graph_break()  # what `fullgraph=True` refuses; nothing without `torch.compile`
        y = self.linear(input_x)
        return {"loss": torch.nn.functional.mse_loss(y, labels), "logits": y}


DATA = [{"input_x": torch.tensor([float(i)]), "labels": torch.tensor([2.0 * i + 3])} for i in range(8)]


class OwnAcceleratorTrainer(Trainer):
    """A subclass that builds its own `Accelerator`, without `super().create_accelerator_and_postprocess()`: what
    the 5.24 `Trainer` needs of that method, and nothing of the fix's reconciliation."""

    def create_accelerator_and_postprocess(self):
        self.accelerator = Accelerator(cpu=True, mixed_precision=self.args.mixed_precision)
        self.gather_function = self.accelerator.gather_for_metrics
        self.is_deepspeed_enabled = False
        self.is_fsdp_enabled = False


def describe(state) -> str:
    """An `AcceleratorState` (an `Accelerator`'s `state`): what an `Accelerator` reports of it."""
    compile_settings = ",".join(f"{key}={value}" for key, value in sorted(state.dynamo_plugin.to_dict().items()))
    return f"{state.distributed_type.value}/{state.mixed_precision}/{state.device.type}/{compile_settings}"


def complete_state() -> str | None:
    """`describe` of the shared `AcceleratorState` if an `Accelerator` completed it (None for none or a half-built
    one), read without `AcceleratorState()`, which could change it."""
    shared = AcceleratorState._shared_state
    if "_mixed_precision" not in shared or shared.get("dynamo_plugin") is None:
        return None
    if not isinstance(shared.get("device"), torch.device):
        return None  # joined to a `PartialState` that failed (e.g. gloo without a process group): no device
    state = object.__new__(AcceleratorState)
    state.__dict__ = shared  # what `AcceleratorState.__init__` does first
    return describe(state)


def run_step(step, scope, output_dir):
    if step in MAKERS or step.startswith(DYNAMO):
        made = dynamo_accelerator(step) if step.startswith(DYNAMO) else MAKERS[step]()
        if isinstance(made, Accelerator):
            scope["accelerators"].append(made)
            return describe(made.state)
        if isinstance(made, AcceleratorState):
            return describe(made)
        return made.distributed_type.value
    if step in ARGUMENTS:
        kwargs = dict(ARGUMENTS[step])
        # beside the step's own `accelerator_config` keys; `use_configured_state` answers the question itself (with
        # "reset" it is refused, a request the published release cannot be given)
        if "policy" in scope and step != "args(configured)":
            kwargs["accelerator_config"] = {**kwargs.get("accelerator_config", {}), "existing_state": scope["policy"]}
        scope["args"] = TrainingArguments(
            output_dir=output_dir, report_to="none", max_steps=1, disable_tqdm=True, **kwargs
        )
        return str(scope["args"].device.type)
    if step == "policy(reset)":  # later arguments ask for it; the published release has no such field: it resets
        if "existing_state" in AcceleratorConfig.__dataclass_fields__:
            scope["policy"] = "reset"
        return "set"
    if step == "derive(bf16)":
        scope["args"] = dataclasses.replace(scope["args"], bf16=True, use_cpu=True)
        return str(scope["args"].device.type)
    if step in ("train", "train(own accelerator)"):
        trainer_class = Trainer if step == "train" else OwnAcceleratorTrainer
        trainer = trainer_class(model=Regression(), args=scope["args"], train_dataset=DATA)
        steps = trainer.train().global_step
        compiled = trainer.accelerator.state.dynamo_plugin.backend.value
        return f"{steps} steps/{trainer.accelerator.mixed_precision}/compile {compiled}"
    if step == "use first accelerator":
        accelerator = scope["accelerators"][0]
        model = Regression()
        model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
        accelerator.backward(model(**DATA[1])["loss"])
        optimizer.step()
        return describe(accelerator.state)
    raise ValueError(f"unknown step {step!r}")


def reset():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    for key in [key for key in os.environ if "ACCELERATE" in key or "ACCELERATOR" in key]:
        del os.environ[key]
    torch._dynamo.reset()


def run(program):
    """Observations per step; per step too, whether an `AcceleratorState` existed before it (and `describe` of it
    where an `Accelerator` had completed it), and whether a step building arguments kept the state that existed."""
    reset()
    scope, observed, kept, existing, before = {"accelerators": [], "args": None}, [], [], [], []
    with tempfile.TemporaryDirectory() as output_dir:
        for step in program:
            existing.append(bool(AcceleratorState._shared_state))
            before.append(complete_state())
            # arguments never build an `AcceleratorState`; an equal but distinct `device` in the shared dict stays
            # there only if the state is kept (a key of its own would be one the patched release does not compare)
            device = PartialState._shared_state.get("device")
            watched = (step in ARGUMENTS or step == "derive(bf16)") and isinstance(device, torch.device)
            if watched:
                canary = PartialState._shared_state["device"] = torch.device(str(device))
            if (step in ("train", "train(own accelerator)", "derive(bf16)") and scope["args"] is None) or (
                step == "use first accelerator" and not scope["accelerators"]
            ):
                observed.append("skipped")
            else:
                try:
                    observed.append("ok: " + run_step(step, scope, output_dir))
                except Exception as error:  # every outcome is an observation
                    observed.append(f"{type(error).__name__}: {str(error).splitlines()[0][:160]}")
            kept.append(watched and PartialState._shared_state.get("device") is canary)
    return {"observed": observed, "kept": kept, "existing": existing, "before": before}


if __name__ == "__main__":
    for program in json.load(sys.stdin):
        print(PREFIX + json.dumps({"program": program, **run(program)}), flush=True)
