"""The code the fix adds to transformers, as real Python: ruff reads it, `training_args_edit.py` copies it.

Never imported: `training_args_edit.py` parses this file and inserts the source of each member into a release's
`trainer_pt_utils.py`, `training_args.py` and `trainer.py`, whose modules provide the names imported here. Each
class holds what the fix adds to the class of that name, in the form every pinned release takes; the module-level
assignment goes into `training_args.py` below its `logger`.
"""

import os
import weakref
from dataclasses import field
from typing import Literal

from accelerate.state import AcceleratorState, PartialState
from transformers.utils import logging

logger = logging.get_logger(__name__)

# The `TorchDynamoPlugin`s, by `id`, of accelerator states `TrainingArguments` kept and of those a `Trainer` created
_kept_states, _trainer_states = weakref.WeakValueDictionary(), weakref.WeakValueDictionary()


class AcceleratorConfig:
    """The key the fix adds to `AcceleratorConfig` (trainer_pt_utils.py), beside `use_configured_state`."""

    existing_state: Literal["auto", "preserve", "reset"] = field(
        default="auto",
        metadata={
            "help": "What to do with the state of an `Accelerator` created before the arguments: `auto` keeps it where"
            " it equals what the arguments and the `Trainer` set up, `preserve` keeps it as it is, `reset` resets it."
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
    """What the fix adds to `TrainingArguments`: methods, and statements in `_setup_devices`."""

    def _keep_accelerator_state(self, partial_state: dict, state: dict) -> None:
        """Puts back a state an `Accelerator` made (#40376), not a `Trainer`'s, whose `PartialState` is the new one."""
        policy = getattr(self.accelerator_config, "existing_state", "reset")  # no `AcceleratorConfig`: as before
        plugin = state.get("dynamo_plugin")
        _kept_states.pop(id(plugin), None)  # reset: kept again below, or not at all
        if policy == "reset" or "_mixed_precision" not in state or _trainer_states.get(id(plugin)) is plugin:
            return  # no `Accelerator`'s state, one a failed initialization left without a plugin, or a `Trainer`'s
        built, skip = PartialState._shared_state, {"_cpu"}  # `_cpu` only chose the device, which is compared
        if state.get("fsdp_plugin") or state.get("megatron_lm_plugin"):
            skip.add("distributed_type")  # which the `AcceleratorState` turned into its own; the `Trainer` resets it
        old, new = partial_state.get("device"), built["device"]
        if getattr(old, "type", None) == new.type and None in (old.index, new.index):
            skip.add("device")  # named without its index: `cpu` is `cpu:0`
        keys = [key for key in sorted(built.keys() - skip) if partial_state.get(key) != built[key]]
        differences = [f"its `{key}` is `{partial_state.get(key)}`, these arguments' `{built[key]}`" for key in keys]
        if policy == "preserve" or not differences:
            built.update(partial_state)
            AcceleratorState._shared_state.update(state)
            if policy == "auto":  # any `Trainer` checks it
                _kept_states[id(plugin)] = plugin
        elif self.distributed_state.is_main_process and self.get_process_log_level() <= logging.WARNING:
            logger.warning(f"Resetting an earlier `Accelerator`'s state: {'; '.join(differences)}.")  # once a launch

    def _kept_accelerator_state(self) -> dict | None:
        state = AcceleratorState._shared_state
        return state if _kept_states.get(id(state.get("dynamo_plugin")), False) is state.get("dynamo_plugin") else None

    def _reset_kept_accelerator_state(self) -> None:
        _kept_states.pop(id(AcceleratorState._shared_state["dynamo_plugin"]))
        AcceleratorState._reset_state(reset_partial_state=True)
        n_gpu = self._n_gpu  # which a user may have changed since
        self.__dict__.pop("_setup_devices", None)
        self._setup_devices  # set up again, as by new arguments
        self._n_gpu = n_gpu

    def _note_trainer_state(self, built_accelerator: bool) -> None:
        plugin = AcceleratorState._shared_state.get("dynamo_plugin")
        if plugin is not None and _kept_states.get(id(plugin)) is not plugin:
            _trainer_states[id(plugin)] = plugin  # a state the `Trainer` made, even if it then failed
        elif built_accelerator:
            _kept_states.pop(id(plugin), None)  # a kept state it took: left to accelerate from now on

    def _setup_devices(self):
        # the statements the fix adds to the release's `_setup_devices`, in order: before it resets the state, and
        # after it builds the fresh `PartialState`

        existing_state = dict(PartialState._shared_state), dict(AcceleratorState._shared_state)

        self._keep_accelerator_state(*existing_state)


class Trainer:
    """What the fix adds to the `Trainer`: a method, and the statements that call it and note the state it made."""

    def _reset_unusable_accelerator_state(self, kwargs: dict | None) -> None:
        """Resets the state the arguments kept (#40376) unless `Accelerator(**kwargs)` can use it (`None`: unknown)."""
        state = self.args._kept_accelerator_state()
        if state is None:
            return  # no state these arguments kept: accelerate checks one made since, as before
        own, kwargs, cpu = kwargs is None, kwargs or {}, state["device"].type == "cpu"
        asked = kwargs.get("mixed_precision") or os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        dynamo = kwargs.get("dynamo_plugin") or type(state["dynamo_plugin"])()  # as `Accelerator` defaults them
        pairs = {"mixed_precision": (state["_mixed_precision"], asked), "cpu": (cpu, cpu or bool(kwargs.get("cpu")))}
        pairs |= {f"dynamo_plugin.{k}": (v, getattr(dynamo, k, None)) for k, v in vars(state["dynamo_plugin"]).items()}
        shown = [f"its `{k}` is `{a}`, this `Trainer`'s `{b}`" for k, (a, b) in pairs.items() if a != b]
        keys = ("deepspeed_plugins", "deepspeed_plugin", "fsdp_plugin", "megatron_lm_plugin", "torch_tp_plugin")
        plugins = [f"`{key}`" for key in (*keys, "parallelism_config") if state.get(key) or kwargs.get(key)]
        plugins += [f"`{type(self).__name__}.create_accelerator_and_postprocess`"] if own else []
        if not plugins and not shown:
            return
        reason = f"with {', '.join(plugins)}, it cannot be reused" if plugins else "; ".join(shown)
        reason += " (to reuse it as it is, pass `accelerator_config={'use_configured_state': True}`)" if own else ""
        level = logging.INFO if plugins else logging.WARNING  # a plugin cannot be shown equal: not a difference
        if self.args.process_index == 0 and level >= self.args.get_process_log_level():  # as the `Trainer` logs
            logger.log(level, f"Resetting an earlier `Accelerator`'s state: {reason}.")
        self.args._reset_kept_accelerator_state()

    def __init__(self):
        # around the call of `create_accelerator_and_postprocess` in `__init__` (a subclass's own `Accelerator` counts)

        if type(self).create_accelerator_and_postprocess is not Trainer.create_accelerator_and_postprocess:
            self._reset_unusable_accelerator_state(None)
        try:
            self.create_accelerator_and_postprocess()
        finally:  # a state its `Accelerator` stored is the `Trainer`'s, even if it then raised
            self.args._note_trainer_state(hasattr(self, "accelerator"))

    def create_accelerator_and_postprocess(self, args):
        # the statement the fix adds before the `Accelerator` the `Trainer` creates

        self._reset_unusable_accelerator_state(args)
