"""The code the fix adds to transformers, as real Python: ruff reads it, `training_args_edit.py` copies it.

Never imported: `training_args_edit.py` parses this file and inserts the source of each member into a release's
`trainer_pt_utils.py`, `training_args.py` and `trainer.py`, whose modules provide the names imported here. Each
class holds what the fix adds to the class of that name, in the form every pinned release takes; the module-level
assignment goes into `training_args.py` below its `logger`.
"""

import os
import weakref
from dataclasses import field

from accelerate.state import AcceleratorState, PartialState
from transformers.utils import logging

logger = logging.get_logger(__name__)

# The `dynamo_plugin` of each accelerator state `TrainingArguments` kept, by its `id`, and of the last one a `Trainer`
# created, as "trainer": weak references tell the states apart without keeping their plugins alive
_ACCELERATOR_STATES = weakref.WeakValueDictionary()


class AcceleratorConfig:
    """The key the fix adds to `AcceleratorConfig` (trainer_pt_utils.py), beside `use_configured_state`."""

    existing_state: str = field(
        default="auto",
        metadata={
            "help": "What `TrainingArguments` do with an `Accelerator`'s state that exists already: `auto`, `preserve`"
            " or `reset` (see the class docstring)."
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
    """What the fix adds to `TrainingArguments`: a method, and statements in `_setup_devices`."""

    def _keep_accelerator_state(self, partial_state: dict, accelerator_state: dict) -> int | None:
        """Puts back the state `_setup_devices` reset (#40376) if an `Accelerator` completed it, no `Trainer` created
        it and, under `existing_state="auto"`, its `PartialState` is the one just built. Returns the `id` of a state
        kept under `"auto"`: the `Trainer` resets it where its own settings differ."""
        policy = getattr(self.accelerator_config, "existing_state", "reset")  # no `AcceleratorConfig`: as before
        plugin = accelerator_state.get("dynamo_plugin")
        if policy == "reset" or "_mixed_precision" not in accelerator_state or plugin is None:
            return None  # no `Accelerator`'s state, or one a failed initialization left half-built
        if plugin is _ACCELERATOR_STATES.get("trainer"):
            return None  # a previous `Trainer`'s: replaced quietly, as before
        built, skip = PartialState._shared_state, {"_cpu"}  # `_cpu` only chose the device, which is compared
        if accelerator_state.get("fsdp_plugin") or accelerator_state.get("megatron_lm_plugin"):
            skip.add("distributed_type")  # which the `AcceleratorState` turned into its own; the `Trainer` resets it
        keys = [key for key in sorted(built.keys() - skip) if partial_state.get(key) != built[key]]
        differences = [f"its `{key}` is `{partial_state.get(key)}`, these arguments' `{built[key]}`" for key in keys]
        if policy == "auto" and differences:
            if self.distributed_state.is_main_process:  # once per launch
                logger.warning(f"Resetting an earlier `Accelerator`'s state: {'; '.join(differences)}.")
            return None
        built.update(partial_state)
        AcceleratorState._shared_state.update(accelerator_state)
        if policy == "preserve":
            return None
        _ACCELERATOR_STATES[id(plugin)] = plugin
        return id(plugin)

    def _note_trainer_state(self) -> None:
        """Notes a state a `Trainer` with these arguments created: the next arguments replace it, as before."""
        plugin = AcceleratorState._shared_state.get("dynamo_plugin")
        if plugin is not None and plugin is not _ACCELERATOR_STATES.get(getattr(self, "_kept_state", None)):
            _ACCELERATOR_STATES["trainer"] = plugin

    def _setup_devices(self):
        # the statements the fix adds to the release's `_setup_devices`, in order: before it resets the state, and
        # after it builds the fresh `PartialState`

        existing_state = dict(PartialState._shared_state), dict(AcceleratorState._shared_state)

        self._kept_state = self._keep_accelerator_state(*existing_state)


class Trainer:
    """What the fix adds to the `Trainer`: a method, and the statements that call it and note the state it made."""

    def _reset_unusable_accelerator_state(self, accelerator_args: dict | None) -> None:
        """Resets the state the arguments kept (#40376) unless `Accelerator(**accelerator_args)` can use it as is
        (`None`: the `Accelerator` a subclass builds itself, whose arguments are not known here)."""
        from accelerate.state import AcceleratorState
        from accelerate.utils import TorchDynamoPlugin

        from .training_args import _ACCELERATOR_STATES

        state, kept = AcceleratorState._shared_state, _ACCELERATOR_STATES.get(getattr(self.args, "_kept_state", None))
        if kept is None or kept is not state.get("dynamo_plugin"):
            return  # no state these arguments kept: accelerate checks one made since, as before
        own, accelerator_args = accelerator_args is None, accelerator_args or {}
        # what `Accelerator(**accelerator_args)` takes from the environment where the `Trainer` passes nothing
        mixed_precision = accelerator_args.get("mixed_precision") or os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        compared = {
            "mixed_precision": (state["_mixed_precision"], mixed_precision),
            "dynamo_plugin": (state["dynamo_plugin"], accelerator_args.get("dynamo_plugin") or TorchDynamoPlugin()),
            "cpu": (state["device"].type == "cpu", state["device"].type == "cpu" or bool(accelerator_args.get("cpu"))),
        }
        shown = [f"its `{k}` is `{a}`, this `Trainer`'s `{b}`" for k, (a, b) in compared.items() if a != b]
        keys = ("deepspeed_plugins", "deepspeed_plugin", "fsdp_plugin", "megatron_lm_plugin", "torch_tp_plugin")
        plugins = [f"`{key}`" for key in (*keys, "parallelism_config") if state.get(key) or accelerator_args.get(key)]
        if own:
            plugins.append(f"`{type(self).__name__}.create_accelerator_and_postprocess`")
        if not plugins and not shown:
            return
        reason = f"with {', '.join(plugins)}, it cannot be reused" if plugins else "; ".join(shown)
        if self.args.process_index == 0:  # once per launch
            level = logging.INFO if plugins else logging.WARNING  # a plugin cannot be shown equal: not a difference
            logger.log(level, f"Resetting an earlier `Accelerator`'s state: {reason}.")
        AcceleratorState._reset_state(reset_partial_state=True)
        n_gpu = self.args._n_gpu  # which a user may have changed since
        self.args.__dict__.pop("_setup_devices", None)  # the devices set up again, as by new arguments
        _ = self.args._setup_devices
        self.args._n_gpu = n_gpu

    def __init__(self):
        # around the call of `create_accelerator_and_postprocess` in `__init__` (a subclass's own `Accelerator` counts)

        if type(self).create_accelerator_and_postprocess is not Trainer.create_accelerator_and_postprocess:
            self._reset_unusable_accelerator_state(None)

        self.args._note_trainer_state()

    def create_accelerator_and_postprocess(self, args):
        # the statement the fix adds before the `Accelerator` the `Trainer` creates

        self._reset_unusable_accelerator_state(args)
