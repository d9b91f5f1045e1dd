"""Runs programs of accelerate states and `TrainingArguments` under a launcher; writes what every process saw.

    python harness/launch_worker.py OUT LAUNCHER[,LAUNCHER ...] PORT PROGRAM [PROGRAM ...]

A program is steps joined by " ; ". Under `torchrun` and `accelerate` (plain, `deepspeed*`, `fsdp*`: the launcher
starts this file in every rank) each rank runs every step. Under `notebook`, `debug` and `fork` this file runs
once: the steps before " | " run here, then each child of `notebook_launcher`, `debug_launcher` or a
`multiprocessing` fork runs the rest.
Programs run one after the other, each from no accelerate state (process groups stay: both releases compared see
the same sequence). Writes OUT/<launcher>-rank<N>.json, {program: [observation per step]} for the steps that rank ran.
"""

import dataclasses
import json
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState, debug_launcher, notebook_launcher
from accelerate.state import AcceleratorState, GradientState
from transformers import Trainer, TrainingArguments
from transformers.utils import logging

from harness.differential_worker import DATA, Regression

logging.set_verbosity_error()
# the launcher starts this file in every process; the others fork from it
IN_RANKS = ("torchrun", "accelerate", "deepspeed", "deepspeed3", "fsdp")
MAKERS = {
    "Accelerator()": lambda: Accelerator(),
    "Accelerator(cpu)": lambda: Accelerator(cpu=True),
    "Accelerator(bf16)": lambda: Accelerator(cpu=True, mixed_precision="bf16"),
    "PartialState()": lambda: PartialState(),
}
ARGUMENTS = {"args()": {}, "args(use_cpu)": {"use_cpu": True}, "args(bf16)": {"use_cpu": True, "bf16": True}}
RENDEZVOUS_FAILED = "Gloo connectFullMesh failed"  # see `launch_children`


def describe_state(state) -> str:
    return f"{state.distributed_type.value}/{state.num_processes} processes/rank {state.process_index}"


def describe_args(args) -> str:
    return f"{args.parallel_mode.value}/world {args.world_size}/rank {args.process_index}/{args.device.type}"


def run_step(step, scope, output_dir) -> str:
    if step in MAKERS:
        made = MAKERS[step]()
        if isinstance(made, Accelerator):
            scope["accelerators"].append(made)
            return describe_state(made.state)
        return describe_state(made)
    if step in ARGUMENTS:
        scope["args"] = TrainingArguments(
            output_dir=output_dir, report_to="none", max_steps=2, disable_tqdm=True, **ARGUMENTS[step]
        )
        return describe_args(scope["args"])
    if scope["args"] is None and step in ("replace(use_cpu)", "train"):
        return "skipped"
    if step == "replace(use_cpu)":
        scope["args"] = dataclasses.replace(scope["args"], use_cpu=True)
        return describe_args(scope["args"])
    if step == "train":
        trainer = Trainer(model=Regression(), args=scope["args"], train_dataset=DATA)
        steps = trainer.train().global_step
        return f"{steps} steps/{trainer.accelerator.mixed_precision}/{describe_state(trainer.accelerator.state)}"
    if step == "use first accelerator":
        if not scope["accelerators"]:
            return "skipped"
        accelerator = scope["accelerators"][0]
        model = Regression()
        model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
        accelerator.backward(model(**DATA[1])["loss"])
        optimizer.step()
        return describe_state(accelerator.state)
    raise ValueError(f"unknown step {step!r}")


def run_steps(steps, scope, output_dir) -> list[str]:
    observed = []
    for step in steps:
        try:
            observed.append("ok: " + run_step(step, scope, output_dir))
        except Exception as error:  # every outcome is an observation
            observed.append(f"{type(error).__name__}: {str(error).splitlines()[0][:160]}")
    return observed


def fresh_start():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


def child(steps, scope, output_dir, results):
    """In a launched child: runs `steps` and writes this rank's observations to `results`/<rank>.json."""
    observed = run_steps(steps, scope, output_dir)
    # `debug_launcher` passes the rank to the process group only
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else int(os.environ.get("RANK", 0))
    Path(results, f"{rank}.json").write_text(json.dumps(observed))


def launch_children(launcher, steps, scope, output_dir, port, tries=3) -> dict[int, list[str]]:
    with tempfile.TemporaryDirectory() as results:
        args = (steps, scope, output_dir, results)
        try:
            if launcher == "notebook":
                notebook_launcher(child, args, num_processes=2, use_port=str(port))
            elif launcher == "debug":
                debug_launcher(child, args, num_processes=2)  # a file rendezvous: no port
            else:
                process = multiprocessing.get_context("fork").Process(target=child, args=args)
                process.start()
                process.join()
        except Exception as error:  # the launcher refused: one observation for every child
            # a child catches what its steps raise: a crash is the launcher's own, and gloo's connection over
            # `debug_launcher`'s file rendezvous, before any step, fails now and then on a loaded host (either
            # release): no observation of the program, so it is launched again
            if tries > 1 and RENDEZVOUS_FAILED in str(error) and not any(Path(results).iterdir()):
                return launch_children(launcher, steps, scope, output_dir, port, tries - 1)
            lines = str(error).splitlines() or [""]
            # a crashed child's exception (`ProcessRaisedException`) starts empty and ends with the child's error
            shown = lines[0] if lines[0].strip() else next((line for line in reversed(lines) if line.strip()), "")
            refused = [f"launch {type(error).__name__}: {shown[:160]}"]
            return {0: refused, 1: refused}
        return {int(p.stem): json.loads(p.read_text()) for p in Path(results).glob("*.json")}


def main(out, launchers, port, programs):
    if os.environ.get("ACCELERATE_USE_FSDP") == "true":  # `fsdp`: the state a GPU host's launch sets up
        from tests.scripts.fsdp_on_cpu import build_fsdp_on_cpu

        build_fsdp_on_cpu()
    for launcher in launchers.split(","):
        per_rank: dict[int, dict] = {}
        with tempfile.TemporaryDirectory() as output_dir:
            for program in programs:
                fresh_start()
                scope = {"accelerators": [], "args": None}
                if launcher in IN_RANKS:
                    steps = [s.strip() for s in program.replace("|", ";").split(";")]
                    per_rank.setdefault(int(os.environ["RANK"]), {})[program] = run_steps(steps, scope, output_dir)
                    continue
                parent, _, children = program.partition("|")
                observed = run_steps([s.strip() for s in parent.split(";") if s.strip()], scope, output_dir)
                child_steps = [s.strip() for s in children.split(";") if s.strip()]
                for rank, seen in launch_children(launcher, child_steps, scope, output_dir, port).items():
                    per_rank.setdefault(rank, {})[program] = observed + seen
        for rank, seen in per_rank.items():
            Path(out, f"{launcher}-rank{rank}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    from tests.scripts.launched_exit import exit_after_report

    exit_after_report()
