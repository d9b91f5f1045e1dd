"""Run under `accelerate launch`: for each scenario, an Accelerator, then TrainingArguments; reports each rank's state.

    multiprocess_state.py OUTPUT_DIR POLICY/MODE ...

POLICY is a value of `accelerator_config`'s `existing_state` (or `default`: unset). MODE `keep` builds the arguments
over the live state, `end_training` destroys the process group first, `fsdp_launch` builds the Accelerator as
`accelerate launch --use_fsdp --fsdp_version 2` does on GPUs (FSDP from the environment; `fsdp_on_cpu` makes
accelerate set it up on CPU processes), `fsdp_launch_bf16` the same with `--mixed_precision bf16` and arguments with
`bf16=True`, `fsdp1_launch` and `fsdp1_launch_bf16` with `--fsdp_version 1` (its plugin looks up a GPU for
`sync_module_states`: one is mocked), `fsdp_plugin` passes an FSDP plugin of its own in code, `debug_mode` builds
the Accelerator in accelerate's debug mode, which the arguments' `PartialState` is not in, and `bf16_then_trainer` a
bf16 Accelerator, then arguments without bf16 and a `Trainer` on them. The scenarios run
one after the other in the same processes (one launch: the interpreters start once); each begins from no accelerate
state, over the process group the previous one left.
"""

import contextlib
import json
import os
import sys
from pathlib import Path
from unittest.mock import patch

from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import FullyShardedDataParallelPlugin
from fsdp_on_cpu import build_fsdp_on_cpu
from launched_exit import exit_after_report
from transformers import Trainer, TrainingArguments
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging

from harness.scenarios import is_patched
from tests.testing_utils import TinyRegression


def describe(accelerator):
    state = accelerator.state
    if not hasattr(state, "distributed_type"):
        return None
    return {"type": str(state.distributed_type), "rank": state.process_index, "world": state.num_processes}


@contextlib.contextmanager
def gpu_host(mode):
    """FSDP1's plugin looks up the GPU `sync_module_states` initializes on: a GPU host's answer, for `fsdp1_*`."""
    with contextlib.ExitStack() as stack:
        if mode.startswith("fsdp1"):
            stack.enter_context(patch("accelerate.utils.dataclasses.is_cuda_available", return_value=True))
            stack.enter_context(patch("torch.cuda.current_device", return_value=0))
        yield


def run(output_dir, policy, mode, rebuilds):
    patched = is_patched()
    extra = {"accelerator_config": {"existing_state": policy}} if patched and policy != "default" else {}
    AcceleratorState._reset_state(True)
    for variable in ("ACCELERATE_USE_FSDP", "FSDP_VERSION", "ACCELERATE_MIXED_PRECISION"):
        os.environ.pop(variable, None)
    if mode.startswith(("fsdp_launch", "fsdp1_launch")):  # the variables `accelerate launch --use_fsdp` exports
        os.environ.update(ACCELERATE_USE_FSDP="true", FSDP_VERSION="1" if mode.startswith("fsdp1") else "2")
    if mode.endswith("_bf16"):
        os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"
        extra.update(bf16=True, use_cpu=True)  # bf16 arguments on a CPU-only host need `use_cpu`
    plugin = (
        FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=False) if mode == "fsdp_plugin" else None
    )
    precision = "bf16" if mode == "bf16_then_trainer" else None
    with gpu_host(mode), patch.dict(os.environ, {"ACCELERATE_DEBUG_MODE": "true"} if mode == "debug_mode" else {}):
        accelerator = Accelerator(fsdp_plugin=plugin, mixed_precision=precision)
    before = describe(accelerator)
    if mode == "end_training":
        accelerator.end_training()  # destroys the process group
        # A new rendezvous needs a store of its own: torchrun's still holds the first group's keys, which torch reuses.
        os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
        os.environ["MASTER_PORT"] = os.environ["REBUILD_PORTS"].split(",")[rebuilds]  # free ones, the test's choice
    error = None
    with CaptureLogger(logging.get_logger("transformers")) as logged:
        try:
            with gpu_host(mode):
                args = TrainingArguments(output_dir=output_dir, report_to="none", **extra)
            if mode == "bf16_then_trainer":
                Trainer(TinyRegression(), args)
        except ValueError as refused:
            error = str(refused)
    after = describe(accelerator)
    PartialState().wait_for_everyone()  # whatever happened to the state, the processes still talk
    return {"before": before, "after": after, "logged": logged.out, "error": error}


build_fsdp_on_cpu()
output_dir, scenarios = sys.argv[1], sys.argv[2:]
results = {}
for scenario in scenarios:
    policy, mode = scenario.split("/")
    results[scenario] = run(output_dir, policy, mode, rebuilds=sum(s.endswith("/end_training") for s in results))
# One file per rank: torchrun interleaves the ranks' stdout.
rank = PartialState().process_index
Path(output_dir, f"rank{rank}.json").write_text(json.dumps(results))
exit_after_report()
