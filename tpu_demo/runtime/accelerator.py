"""The Accelerator the fine-tune runs on, and what accelerate 1.15 and torch_xla need around it.

The Accelerator is made first, from the settings that must exist at its creation (mixed precision, the loaders'
kind); `TrainingArguments` are parsed after it (huggingface/transformers#40376), and what comes from them (the output
folder, trackers, gradient accumulation) is given to the Accelerator then: each default is read once, from its field.
"""

import contextlib
import importlib.util
import os

import accelerate
import torch
import transformers
from accelerate import Accelerator
from accelerate.tracking import filter_trackers
from accelerate.utils import (
    DataLoaderConfiguration,
    DistributedType,
    is_compiled_module,
    is_torch_xla_available,
    parse_flag_from_env,
)

from tpu_demo.config.checks import trackers
from tpu_demo.config.load import parse_all, parse_data, parse_launch
from tpu_demo.errors import FineTuneError
from tpu_demo.runtime.spmd import Spmd
from tpu_demo.runtime.spmd import wanted as spmd_wanted


def use_stateful_dataloader(data_args) -> bool:
    # On XLA the prepared loader is wrapped in an MpDeviceLoader, whose position accelerate does not checkpoint.
    stateful = data_args.stateful_dataloader and not is_torch_xla_available()
    return stateful and importlib.util.find_spec("torchdata") is not None


def make_accelerator(raw):
    """The Accelerator, the parsed config (`FineTuneConfig`) and the `Spmd` of this process (None unless it runs on an
    XLA host with several devices, or sharded on XLA), the Accelerator following the config's settings."""
    launch = parse_launch(raw)
    spmd = Spmd(launch) if spmd_wanted(launch) else None
    compiled = bool(raw.get("torch_compile"))  # as for the Trainer, accelerate compiles the model in `prepare`
    accelerator = Accelerator(
        mixed_precision=launch.mixed_precision,
        dynamo_backend="inductor" if compiled else None,
        dataloader_config=DataLoaderConfiguration(
            use_seedable_sampler=True, use_stateful_dataloader=use_stateful_dataloader(parse_data(raw))
        ),
    )
    if compiled and accelerator.distributed_type == DistributedType.XLA:
        raise FineTuneError("torch_compile: not on XLA, which compiles each step's graph already; remove it")
    if not spmd:
        refuse_unsharded(accelerator, launch.sharding)
    # What `accelerate launch --mixed_precision` exports; set here too so a direct run agrees with the Accelerator.
    os.environ["ACCELERATE_MIXED_PRECISION"] = accelerator.mixed_precision
    config = parse_all(raw)
    if not hasattr(accelerator.state, "distributed_type"):
        raise FineTuneError(
            "building TrainingArguments reset the Accelerator's state "
            f"(transformers {transformers.__version__}, huggingface/transformers#40376). Install the patched "
            "transformers (`tox -e demo` does) and keep `accelerator_config: {existing_state: auto}` (the default) "
            "or preserve, not reset."
        )
    training = config.training
    accelerator.gradient_accumulation_steps = training.gradient_accumulation_steps
    accelerator.project_configuration.set_directories(training.output_dir)
    accelerator.log_with = filter_trackers(trackers(training.report_to), accelerator.logging_dir)
    return accelerator, config, spmd


def uncompiled(model):
    """The prepared model without torch.compile's wrapper, which accelerate puts outermost: its weights under their own
    names (`_orig_mod.` ones load as missing), the sharding wrappers kept for their collectives."""
    return model._orig_mod if is_compiled_module(model) else model


def refuse_unsharded(accelerator, sharding: str = "no") -> None:
    """The config's `sharding: fsdp` or `accelerate launch --use_fsdp` (or `--use_deepspeed`) asked for sharding, but
    accelerate 1.15 set up another kind (on CPU it builds DDP without a word): the run would train unsharded, so it
    does not start."""
    if sharding == "fsdp" and accelerator.distributed_type != DistributedType.FSDP:
        raise FineTuneError(
            f"sharding: fsdp, but accelerate set up {accelerator.distributed_type.value}: the model would train "
            "unsharded. Start the run with `python -m tpu_demo.launch` (it passes accelerate's FSDP flags) on GPUs, "
            "or on XLA"
        )
    for kind, variable in (
        (DistributedType.FSDP, "ACCELERATE_USE_FSDP"),
        (DistributedType.DEEPSPEED, "ACCELERATE_USE_DEEPSPEED"),
    ):
        if parse_flag_from_env(variable) and accelerator.distributed_type != kind:
            raise FineTuneError(
                f"{kind.value} was asked for ({variable}), but accelerate set up "
                f"{accelerator.distributed_type.value}: the model would train unsharded (accelerate "
                f"{accelerate.__version__} shards on GPUs only)"
            )


def expose_xla_loader_dataset() -> None:
    """accelerate 1.15's `save_state`/`load_state` read `.dataset` from every prepared loader; its XLA wrapper
    (`MpDeviceLoaderWrapper`) has none. Forward it to the wrapped loader."""
    from accelerate.data_loader import MpDeviceLoaderWrapper

    if not hasattr(MpDeviceLoaderWrapper, "dataset"):
        MpDeviceLoaderWrapper.dataset = property(lambda self: self._loader.dataset)


def forward_precision(accelerator):
    """bf16 autocast on XLA. accelerate 1.15 autocasts there only off a TPU; on a TPU it sets XLA_USE_BF16, which
    torch_xla 2.6+ no longer reads, so training would silently stay fp32. Elsewhere accelerate's own autocast works."""
    if accelerator.distributed_type == DistributedType.XLA and accelerator.mixed_precision == "bf16":
        return torch.autocast("xla", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class ComputeDtype:
    """The dtype the model's first Linear layer computed in: what mixed precision really did, read from the forward
    (host-side metadata, no device sync)."""

    def __init__(self, model):
        layer = next(m for m in model.modules() if isinstance(m, torch.nn.Linear))
        self.dtype = None
        self.handle = layer.register_forward_hook(self.record)

    def record(self, module, args, output):
        self.dtype = str(output.dtype).removeprefix("torch.")
        self.handle.remove()
