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

logger = logging.get_logger(__name__)


class TrainingArguments:
    """The field, the methods and the `_setup_devices` statements the fix adds, as the newest releases take them."""

    accelerator_state_policy: str = field(
        default="auto",
        metadata={
            "help": (
                "What to do with an accelerator state that exists before these arguments, e.g. an `Accelerator`'s: "
                "`auto` keeps it if it is the state they would create and otherwise resets it, `preserve` keeps it "
                "and raises if it differs, `reset` always resets it."
            ),
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
        """Puts back the state `_setup_devices` reset if it is the one these arguments create (`auto`, `preserve`)."""
        if not partial_state or self.accelerator_state_policy == "reset":
            return
        expected = {
            key: value for key, value in PartialState._shared_state.items() if key not in ("_cpu", "fork_launched")
        }
        if accelerator_state:
            expected["_mixed_precision"] = self.mixed_precision
            expected["dynamo_plugin"] = self._torch_dynamo_plugin()
            expected["parallelism_config"] = self.parallelism_config
            if accelerator_state.get("distributed_type") == DistributedType.FSDP:
                # what `accelerate launch --use_fsdp` sets up: a `Trainer` builds it from the same variables
                from accelerate.utils import FullyShardedDataParallelPlugin

                expected.update(distributed_type=DistributedType.FSDP, fsdp_plugin=FullyShardedDataParallelPlugin())
        existing = partial_state | accelerator_state
        differences = [
            f"`{key.lstrip('_')}` is `{existing.get(key)}`, not `{value}`"
            for key, value in expected.items()
            if existing.get(key) != value
        ]
        if accelerator_state and (self.deepspeed or self.fsdp):
            differences.append("`deepspeed` or `fsdp` needs a state built for it")
        if differences and self.accelerator_state_policy == "auto":
            if accelerator_state.get("_mixed_precision"):  # an `Accelerator` was created, not only attempted
                logger.warning(
                    "Resetting the state of an `Accelerator` created before these `TrainingArguments`, which differ "
                    f"from it ({'; '.join(differences)}): create it with the same settings, or after them."
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

    def _setup_devices(self):
        # the statements the fix adds to the release's `_setup_devices`, in order: after it logs "setting up devices",
        # before it resets the state (no `use_configured_state`), and after it builds the fresh `PartialState`
        if self.accelerator_state_policy not in ("auto", "preserve", "reset"):
            policy = self.accelerator_state_policy
            raise ValueError(f"`accelerator_state_policy` must be 'auto', 'preserve' or 'reset', not {policy!r}.")
        existing_state = dict(PartialState._shared_state), dict(AcceleratorState._shared_state)
        self._keep_accelerator_state(*existing_state)


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
