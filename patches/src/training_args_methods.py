"""The code the fix adds to transformers, as real Python: ruff reads it, `training_args_edit.py` copies it.

Never imported: `training_args_edit.py` parses this file and inserts the source of each member into a release's
`trainer_pt_utils.py`, `training_args.py` and `trainer.py`, whose modules provide the names imported here. Each
class holds what the fix adds to the class of that name, in the form every pinned release takes.
"""

import os
from dataclasses import field

from accelerate.state import AcceleratorState, PartialState
from transformers.utils import logging

logger = logging.get_logger(__name__)


class AcceleratorConfig:
    """The key the fix adds to `AcceleratorConfig` (trainer_pt_utils.py), beside `use_configured_state`."""

    existing_state: str = field(
        default="auto",
        metadata={
            "help": "What to do with an accelerator state that exists already, e.g. an `Accelerator`'s: keep it if"
            " it is what the `TrainingArguments` and the `Trainer` set up (`auto`), keep it as it is (`preserve`), or"
            " reset it (`reset`). `use_configured_state=True` takes a state that must exist as it is."
        },
    )

    def __post_init__(self):
        if self.existing_state not in ("auto", "preserve", "reset"):
            raise ValueError(f"`existing_state` must be 'auto', 'preserve' or 'reset', not {self.existing_state!r}.")
        if self.use_configured_state and self.existing_state == "reset":
            raise ValueError(
                "`use_configured_state=True` keeps the existing state: it contradicts `existing_state='reset'`."
            )


class TrainingArguments:
    """What the fix adds to `TrainingArguments`: a record and two helpers, and statements in `_setup_devices`."""

    # the `AcceleratorState` a `Trainer` created: replaced by the next arguments as before, unlike a user's
    _trainer_accelerator_state = {}

    @staticmethod
    def _is_trainer_accelerator_state(state: dict) -> bool:
        record = TrainingArguments._trainer_accelerator_state
        return bool(record) and all(state.get(key) is value for key, value in record.items())

    def _keep_existing_state(self, partial_state: dict, accelerator_state: dict) -> None:
        """Puts back the state `_setup_devices` reset if its `PartialState` is the one just built (#40376)."""
        if not partial_state or self._is_trainer_accelerator_state(accelerator_state):
            return
        built, skip = PartialState._shared_state, {"_cpu"}  # `_cpu` only chose the device, which is compared
        if accelerator_state.get("fsdp_plugin") or accelerator_state.get("megatron_lm_plugin"):
            skip.add("distributed_type")  # which the `AcceleratorState` turned into its own; the `Trainer` compares it
        keys = [key for key in sorted(partial_state.keys() | built.keys()) if partial_state.get(key) != built.get(key)]
        differences = [
            f"`{key}`: `{partial_state.get(key)}`, not `{built.get(key)}`" for key in keys if key not in skip
        ]
        # "preserve" keeps a state that differs, but not one a failed initialization left incomplete
        if not differences or self._existing_state == "preserve" and partial_state.keys() >= built.keys():
            built.update(partial_state)
            AcceleratorState._shared_state.update(accelerator_state)
        elif accelerator_state:
            logger.warning(
                "Resetting the existing accelerator state, which differs from the one these `TrainingArguments` "
                f"set up: {'; '.join(differences)}."
            )

    def _setup_devices(self):
        # the statements the fix adds to the release's `_setup_devices`, in order: after it reads (and pops)
        # `use_configured_state`, before it resets the state, and after it builds the fresh `PartialState`

        # what is asked for, for the `Trainer` too: `use_configured_state` is gone from the config now
        self._existing_state = getattr(self.accelerator_config, "existing_state", "auto")
        if accelerator_state_kwargs["use_configured_state"]:  # noqa: F821
            self._existing_state = "use_configured_state"

        existing_state = dict(PartialState._shared_state), dict(AcceleratorState._shared_state)

        if self._existing_state != "reset":
            self._keep_existing_state(*existing_state)


class Trainer:
    """What the fix adds to the `Trainer`: a check, and the statements around its `Accelerator`."""

    def _prepare_accelerator_state(self, accelerator_args: dict) -> bool:
        """Resets a state other than what `accelerator_args` set up (accelerate would ignore them); `True` if none."""
        from accelerate.state import AcceleratorState, PartialState
        from accelerate.utils import TorchDynamoPlugin

        state, policy = AcceleratorState._shared_state, getattr(self.args, "_existing_state", "reset")
        if not state or policy not in ("auto", "preserve"):
            return not state
        # what `Accelerator(**accelerator_args)` takes from the environment where the arguments leave it
        wanted = accelerator_args.get("mixed_precision") or os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        found = state.get("_mixed_precision")
        differences = [f"`mixed_precision`: `{found}`, not `{wanted}`"] if found != wanted else []
        if state.get("dynamo_plugin") != (accelerator_args.get("dynamo_plugin") or TorchDynamoPlugin()):
            differences.append("`dynamo_plugin`")
        # any other setting (a plugin, a device mesh) cannot be shown equal: one held or passed is a difference
        other = state.keys() - PartialState._shared_state.keys() - {"_mixed_precision", "dynamo_plugin"}
        differences += [f"`{key}`" for key in sorted(other) if state[key] is not None]
        plugins = ("deepspeed_plugin", "fsdp_plugin", "megatron_lm_plugin", "torch_tp_plugin", "parallelism_config")
        differences += [f"`{key}`" for key in plugins if accelerator_args.get(key) is not None]
        if accelerator_args.get("deepspeed_plugin") is not None:  # whatever else differs
            differences = ["accelerate cannot take a second DeepSpeed plugin"]
        if not differences:
            return False
        differences = "; ".join(differences)
        if policy == "preserve":
            raise ValueError(
                "`existing_state='preserve'` keeps the existing accelerator state, which differs from what this "
                f"`Trainer` sets up: {differences}. Make them match, or use `existing_state='auto'` to reset it."
            )
        if not self.args._is_trainer_accelerator_state(state):  # a previous `Trainer`'s goes as before, quietly
            logger.warning(
                f"Resetting the existing accelerator state, which differs from this `Trainer`'s: {differences}."
            )
        AcceleratorState._reset_state(reset_partial_state=True)
        self.args.__dict__.pop("_setup_devices", None)  # the devices set up again, as by new arguments
        _ = self.args._setup_devices
        return True

    def create_accelerator_and_postprocess(self, args):
        # the statements the fix adds around the `Accelerator` the `Trainer` creates

        created = self._prepare_accelerator_state(args)
        self.accelerator = Accelerator(**args)  # noqa: F821
        if created:  # a `Trainer`'s state, which the next arguments replace as before
            TrainingArguments._trainer_accelerator_state = dict(vars(self.accelerator.state))
