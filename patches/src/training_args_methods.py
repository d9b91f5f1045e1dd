"""The code the fix adds to transformers' `TrainingArguments`, as real Python: ruff reads it, the edit copies it.

Never imported: `training_args_edit.py` parses this file and inserts the source of each member into a release's
`training_args.py`, whose module provides the names imported here. `TrainingArguments` has the newest release's
form; `OlderReleases` has what replaces a part of it where `training_args_edit.traits` finds a release that differs.
"""

import os
from dataclasses import field

from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType
from transformers.utils import logging
from transformers.utils.generic import strtobool

logger = logging.get_logger(__name__)


class TrainingArguments:
    """The field, the methods and the `_setup_devices` statements the fix adds, as the newest releases take them."""

    accelerator_state_policy: str = field(
        default="auto",
        metadata={
            "help": "Keep a prior accelerator state if it matches (`auto`), always (`preserve`) or never (`reset`).",
            "choices": ["auto", "preserve", "reset"],
        },
    )

    def _torch_dynamo_plugin(self):
        """The `TorchDynamoPlugin` of the `Accelerator` a `Trainer` creates with these arguments."""
        from accelerate.utils import TorchDynamoPlugin

        return TorchDynamoPlugin(
            backend=self.torch_compile_backend,
            mode=self.torch_compile_mode,
            # The Neuron backend fails to compile graphs with dynamic shapes
            dynamic=False if self.torch_compile_backend == "neuron" else None,
        )

    def _keep_accelerator_state(self, partial_state: dict, accelerator_state: dict) -> None:
        """Puts back the state `_setup_devices` reset if each key is what these arguments create (not `reset`)."""
        PartialState._shared_state["_from_training_args"] = True  # not a user's: discarded quietly
        if not partial_state or self.accelerator_state_policy == "reset":
            return
        expected = dict(PartialState._shared_state)
        if accelerator_state:
            precision = self.mixed_precision
            expected.update(_mixed_precision=precision, dynamo_plugin=self._torch_dynamo_plugin(), device_mesh=None)
            expected.update(parallelism_config=self.parallelism_config, deepspeed_plugins=None, torch_tp_plugin=None)
            if "downcast_bfloat" in accelerator_state:  # TPU with bf16
                expected["downcast_bfloat"] = bool(os.environ.get("ACCELERATE_DOWNCAST_BF16"))
            if accelerator_state.get("distributed_type") == DistributedType.FSDP:  # `accelerate launch --use_fsdp`
                from accelerate.utils import FullyShardedDataParallelPlugin

                expected.update(distributed_type=DistributedType.FSDP, fsdp_plugin=FullyShardedDataParallelPlugin())
                if precision != "no":
                    expected["fsdp_plugin"].set_mixed_precision(precision)
        existing, differences = partial_state | accelerator_state, []
        for key in sorted((existing.keys() | expected.keys()) - {"_cpu", "fork_launched", "_from_training_args"}):
            old, new = existing.get(key), expected.get(key, "(not compared)")
            pairs = [(key, old, new)]
            if hasattr(old, "__dataclass_fields__") and type(old) is type(new):  # a plugin: name the fields
                pairs = [(f"{key}.{name}", value, getattr(new, name)) for name, value in vars(old).items()]
            differences += [
                f"`{name.lstrip('_')}` is `{old if len(str(old)) < 80 else type(old).__name__}`, not `{new}`"
                for name, old, new in pairs
                if old != new and getattr(old, "__code__", old) != getattr(new, "__code__", new)  # FSDP1's lambda
            ]
        if self.deepspeed or self.fsdp or strtobool(os.environ.get("ACCELERATE_USE_DEEPSPEED", "false")):
            differences.append("a `Trainer` builds its own DeepSpeed or FSDP plugin from these arguments")
        if differences and self.accelerator_state_policy == "auto":
            made_by_user = accelerator_state.get("_mixed_precision") and "_from_training_args" not in partial_state
            if made_by_user and self.distributed_state.is_main_process:
                logger.warning(
                    "Resetting the state of an `Accelerator` created before these `TrainingArguments`, which differ "
                    f"from it: {'; '.join(differences)}."
                )
            return
        # in place: every live `PartialState` and `Accelerator` shares these dicts
        PartialState._shared_state.clear()
        PartialState._shared_state.update(partial_state)
        AcceleratorState._shared_state.update(accelerator_state)
        if differences:
            raise ValueError(
                "`accelerator_state_policy='preserve'` keeps the existing accelerator state, which differs from these "
                f"arguments: {'; '.join(differences)}. Match the settings or use `accelerator_state_policy='reset'`."
            )

    def _validate_args(self):
        # the statements the fix adds to the release's value checks (`_validate_args`, or `__post_init__` before 5.14)
        if self.accelerator_state_policy not in ("auto", "preserve", "reset"):
            policy = self.accelerator_state_policy
            raise ValueError(f"`accelerator_state_policy` must be 'auto', 'preserve' or 'reset', not {policy!r}.")

    def _setup_devices(self):
        # the statements the fix adds to the release's `_setup_devices`, in order: before it resets the state
        # (no `use_configured_state`), and after it builds the fresh `PartialState`
        existing_state = dict(PartialState._shared_state), dict(AcceleratorState._shared_state)
        self._keep_accelerator_state(*existing_state)


class Trainer:
    """What the fix adds to the `Trainer` of releases that read a model's tensor parallelism (4.50+): the loop goes
    before `create_accelerator_and_postprocess` creates its `Accelerator` from `args`."""

    def create_accelerator_and_postprocess(self, args):
        # the arguments kept the state without the model: reset it if the model's tensor parallelism differs from it
        for key in ("torch_tp_plugin", "parallelism_config"):
            if key in args and AcceleratorState._shared_state.get(key, args[key]) != args[key]:
                AcceleratorState._reset_state()


class OlderReleases:
    """What replaces a part of `TrainingArguments` in older releases (4.x also writes `X | None` as `Optional[X]`)."""

    def _torch_dynamo_plugin(self):
        """The `TorchDynamoPlugin` of the `Accelerator` a `Trainer` creates with these arguments."""
        from accelerate.utils import TorchDynamoPlugin

        # from the variables `__post_init__` sets after setting up the devices
        compiles = self.torch_compile or self.torch_compile_backend or self.torch_compile_mode or self.torchdynamo
        backend = self.torch_compile_backend or self.torchdynamo or ("inductor" if compiles else None)
        return TorchDynamoPlugin(backend=backend, mode=self.torch_compile_mode)

    def computed_mixed_precision(self):
        # resolved by `__post_init__` only after setting up the devices (4.x)
        return "fp16" if self.fp16 else "bf16" if self.bf16 else os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
