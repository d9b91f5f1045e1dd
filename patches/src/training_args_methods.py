"""The code the fix adds to transformers' `TrainingArguments`, as real Python: ruff reads it, the edit copies it.

Never imported: `training_args_edit.py` parses this file and inserts the source of each member into a release's
`training_args.py`, whose module provides the names imported here. `TrainingArguments` has the newest release's
form; `OlderReleases` has what replaces a part of it where `training_args_edit.traits` finds a release that differs.
"""

import os
from dataclasses import field, fields

import torch.distributed as dist
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import DistributedType
from transformers.distributed.utils import _is_torch_distributed_initialized
from transformers.utils import is_accelerate_available, logging

logger = logging.get_logger(__name__)


class TrainingArguments:
    """The field, the methods and the `_setup_devices` statements the fix adds, as the newest releases take them."""

    accelerator_state_policy: str | None = field(
        default=None,
        metadata={
            "help": (
                "What to do with an accelerator state that already exists, e.g. one created by an `Accelerator` "
                "instantiated first: `auto` keeps it when it is the state these arguments would get anyway and "
                "otherwise resets it with a warning, `preserve` keeps it and raises on a difference, `reset` always "
                "resets it (with a warning). Defaults to the `TRANSFORMERS_ACCELERATOR_STATE_POLICY` environment "
                "variable, then `auto`."
            ),
            "choices": ["auto", "preserve", "reset"],
        },
    )

    def _accelerator_state_policy(self) -> str:
        """
        The `accelerator_state_policy` in effect; the field keeps `None` when it comes from the environment.
        """
        policy, source = self.accelerator_state_policy, "`accelerator_state_policy`"
        if policy is None:
            # an empty variable (e.g. from a CI template) counts as unset
            policy = os.environ.get("TRANSFORMERS_ACCELERATOR_STATE_POLICY", "").strip().lower() or "auto"
            source = "`TRANSFORMERS_ACCELERATOR_STATE_POLICY` (read as `accelerator_state_policy` is unset)"
        if policy not in ("auto", "preserve", "reset"):
            raise ValueError(f"{source} must be one of 'auto', 'preserve' or 'reset', got {policy!r}.")
        return policy

    @staticmethod
    def _accelerator_state_defect() -> str | None:
        """
        Why the accelerator state that already exists cannot be used as it is, or `None` when it can.

        `PartialState` and `AcceleratorState` store their attributes one by one in dicts shared by all instances, so
        an initialization that raised part way (a failed rendezvous, an unsupported setting) leaves a state that looks
        initialized but is not, and `destroy_process_group()` leaves a distributed state without its process group.
        """
        partial_state = PartialState._shared_state
        required = ("device", "distributed_type", "num_processes", "process_index", "local_process_index")
        # `AcceleratorState` copies these from `PartialState` first and sets its own attributes last
        accelerator_state = AcceleratorState._shared_state
        if any(partial_state.get(key) is None for key in required) or (
            accelerator_state
            and (
                "_mixed_precision" not in accelerator_state
                or any(accelerator_state.get(key) != partial_state[key] for key in required)
            )
        ):
            return "it did not finish initializing"
        if partial_state["distributed_type"] not in (DistributedType.NO, DistributedType.XLA) and not (
            _is_torch_distributed_initialized()
        ):
            return "the process group it was created with no longer exists"
        return None

    @staticmethod
    def _warn_accelerator_state_reset(reason: str, had_accelerator: bool) -> None:
        if had_accelerator:
            consequence = (
                "the `Accelerator` created before these `TrainingArguments` can no longer be used. Create it with "
                "matching settings or after them."
            )
        else:
            consequence = "it was a `PartialState` only (no `Accelerator` existed), rebuilt from these arguments."
        logger.warning(f"Resetting the existing accelerator state ({reason}): {consequence}")

    def _set_aside_accelerator_state(self, policy: str) -> tuple[dict, dict] | None:
        """
        A copy of the accelerator state that exists, before `_setup_devices` resets it to build a fresh one, if it
        may be kept: `_keep_accelerator_state` compares it with the fresh one.
        """
        existing = None
        if PartialState._shared_state:
            defect = self._accelerator_state_defect()
            if defect is None and policy != "reset":
                existing = (dict(PartialState._shared_state), dict(AcceleratorState._shared_state))
            else:
                # a defective state is rebuilt whatever the policy: no `Accelerator` can work with it
                reason = defect or "`accelerator_state_policy='reset'`"
                self._warn_accelerator_state_reset(reason, bool(AcceleratorState._shared_state))
        return existing

    def _trainer_dynamo_plugin(self):
        """
        The `TorchDynamoPlugin` the `Accelerator` of a `Trainer` built with these arguments gets.
        """
        from accelerate.utils import TorchDynamoPlugin

        if not is_accelerate_available("1.2.0"):
            return TorchDynamoPlugin()
        # as `Trainer._build_accelerator_args` builds it
        return TorchDynamoPlugin(
            backend=self.torch_compile_backend,
            mode=self.torch_compile_mode,
            dynamic=False if self.torch_compile_backend == "neuron" else None,
        )

    def _accelerator_state_conflicts(self, partial_state: dict, accelerator_state: dict) -> list[str]:
        """
        How a state set aside differs from the fresh `PartialState` just built for these arguments, and from the
        `AcceleratorState` the `Trainer` would build with them (the settings it passes to `Accelerator`).
        """
        fresh = PartialState._shared_state
        # `accelerate launch --use_fsdp` (or `--use_deepspeed`) asked for it: a `Trainer`'s `Accelerator` builds the
        # same kind from the same environment variables
        variable = {
            DistributedType.FSDP: "ACCELERATE_USE_FSDP",
            DistributedType.DEEPSPEED: "ACCELERATE_USE_DEEPSPEED",
        }.get(accelerator_state.get("distributed_type"))
        launched_kind = variable is not None and os.environ.get(variable, "false").lower() == "true"
        # every attribute accelerate set, but the `cpu` request (its effect is `device`) and what it reads each time;
        # `AcceleratorState` writes its plugin's kind over the `distributed_type` of `PartialState`
        ignored = ("_cpu", "fork_launched", "distributed_type") if launched_kind else ("_cpu", "fork_launched")
        conflicts = [
            f"`{key}` is `{partial_state.get(key)}` but `{value}` in a state built for these arguments"
            for key, value in fresh.items()
            if key not in ignored and partial_state.get(key) != value
        ]
        if not accelerator_state:
            return conflicts
        if self.deepspeed or self.fsdp:
            # their plugins only take effect in a state built for them
            conflicts.append("`deepspeed` or `fsdp` is set and needs a state built from these arguments")
        elif accelerator_state["distributed_type"] != fresh["distributed_type"] and not launched_kind:
            conflicts.append(f"the existing state is `{accelerator_state['distributed_type']}`, set by a plugin")
        mixed_precision = self.mixed_precision
        if accelerator_state["_mixed_precision"] != mixed_precision:
            conflicts.append(
                f"the existing state uses mixed precision `{accelerator_state['_mixed_precision']}` but these "
                f"arguments ask for `{mixed_precision}`"
            )
        kept, expected = accelerator_state["dynamo_plugin"], self._trainer_dynamo_plugin()
        if kept.backend.value != "NO" or expected.backend.value != "NO":  # without a backend nothing is read
            conflicts.extend(
                f"`torch.compile` `{f.name}` is `{getattr(kept, f.name)}` but `{getattr(expected, f.name)}` for "
                "these arguments"
                for f in fields(expected)
                if getattr(kept, f.name) != getattr(expected, f.name)
            )
        if accelerator_state.get("parallelism_config") != self.parallelism_config:
            conflicts.append("the existing state has another `parallelism_config` than these arguments")
        return conflicts

    def _keep_accelerator_state(self, existing: tuple[dict, dict], policy: str) -> None:
        """
        Puts back the state set aside by `_set_aside_accelerator_state` if it is the state these arguments would get
        anyway; otherwise leaves the fresh one (`"auto"`) or raises (`"preserve"`).
        """
        partial_state, accelerator_state = existing
        conflicts = self._accelerator_state_conflicts(partial_state, accelerator_state)
        if conflicts and policy != "preserve":
            self._warn_accelerator_state_reset("; ".join(conflicts), bool(accelerator_state))
            return
        # in place: every live `PartialState` and `Accelerator` shares these dicts
        PartialState._shared_state.clear()
        PartialState._shared_state.update(partial_state)
        AcceleratorState._shared_state.update(accelerator_state)
        if conflicts:
            raise ValueError(
                "`accelerator_state_policy='preserve'` keeps the accelerator state that already exists, but it "
                f"differs from what these arguments ask for: {'; '.join(conflicts)}. Create the `Accelerator` with "
                "matching settings, change the arguments, or use `accelerator_state_policy='reset'` to discard it."
            )
        logger.info(f"Keeping the existing accelerator state (accelerator_state_policy={policy!r}).")
        if accelerator_state:
            logger.warning_once(
                "Keeping the state of the `Accelerator` created before these `TrainingArguments`, which they match: "
                "a later `Accelerator(...)` shares it (accelerate refuses another `mixed_precision` or `cpu` and "
                "ignores other settings, `notebook_launcher` refuses to start). Pass "
                "`accelerator_state_policy='reset'` to discard it instead."
            )
        if partial_state["distributed_type"] != DistributedType.NO and self.ddp_timeout != 1800:
            # resetting would not help: the process group is only created once, by whoever creates it first
            logger.warning(
                f"`ddp_timeout={self.ddp_timeout}` cannot be applied: the process group of the existing accelerator "
                "state was created before these arguments. Pass the timeout where it is created, e.g. "
                "`Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=...)])`."
            )

    def _setup_devices(self):
        # the statements the fix adds to the release's `_setup_devices`, in order: after it logs "setting up devices",
        # before it resets the state (no `use_configured_state`), and after it builds the fresh `PartialState`
        accelerator_state_policy, existing_state = self._accelerator_state_policy(), None
        existing_state = self._set_aside_accelerator_state(accelerator_state_policy)
        if existing_state is not None:
            self._keep_accelerator_state(existing_state, accelerator_state_policy)


class OlderReleases:
    """What replaces a part of `TrainingArguments` in older releases (4.x also writes `X | None` as `Optional[X]`)."""

    # 5.x's `Trainer` passes its own `TorchDynamoPlugin` to the `Accelerator`: the method above builds the same one.
    # Before, the `Accelerator` builds it from the variables `__post_init__` sets, after it set up the devices (4.x).
    def _trainer_dynamo_plugin(self):
        """
        The `TorchDynamoPlugin` the `Accelerator` of a `Trainer` built with these arguments gets.
        """
        from accelerate.utils import TorchDynamoPlugin

        # The `Trainer`'s `Accelerator` builds it from the variables `__post_init__` sets after the devices: the
        # backend asked for (`inductor` when only `torch_compile` or a mode is) and the mode; unset ones stay as set
        compiles = self.torch_compile or any(
            setting is not None for setting in (self.torch_compile_backend, self.torch_compile_mode, self.torchdynamo)
        )
        backend = self.torch_compile_backend or self.torchdynamo or ("inductor" if compiles else None)
        return TorchDynamoPlugin(backend=backend, mode=self.torch_compile_mode)

    def computed_mixed_precision(self):
        # in `_accelerator_state_conflicts`, where `__post_init__` resolves `self.mixed_precision` only after the
        # devices are set up (4.x): the same resolution, ahead of it
        mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        mixed_precision = "fp16" if self.fp16 else "bf16" if self.bf16 else mixed_precision

    @staticmethod
    def distributed_initialized():
        # in `_accelerator_state_defect`, where `training_args.py` does not import `_is_torch_distributed_initialized`
        # (before 5.15)
        return dist.is_available() and dist.is_initialized()
