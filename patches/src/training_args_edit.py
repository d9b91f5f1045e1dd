"""The single source of truth for the `training_args.py` change.

Every pinned transformers release gets its patch by running these anchored edits on its pristine file, so the
per-version diffs cannot drift apart. An anchor that is missing or ambiguous raises `EditError` naming the version.
"""

import re

TARGET = "src/transformers/training_args.py"


class EditError(RuntimeError):
    pass


DOCSTRING_ENTRY = """

        accelerator_state_policy (`str`, *optional*, defaults to `"auto"`):
            What to do with an accelerator state (`PartialState`/`AcceleratorState`) that already exists when the
            devices are set up, for instance one created by an `Accelerator` instantiated before these arguments:

                - `"auto"`: keep it if it is compatible with these arguments (device, mixed precision, distributed
                  backend, no DeepSpeed or FSDP), otherwise reset it and log a warning naming the differences.
                - `"preserve"`: keep it, and raise a `ValueError` if it contradicts these arguments.
                - `"reset"`: always reset it (the behavior before this option existed), logging a warning when a
                  live state is discarded.

            When unset, the `TRANSFORMERS_ACCELERATOR_STATE_POLICY` environment variable is used, then `"auto"`.
            Ignored when `accelerator_config` sets `use_configured_state=True`."""

FIELD = """    accelerator_state_policy: {annotation} = field(
        default=None,
        metadata={{
            "help": (
                "What to do with an accelerator state that already exists, e.g. one created by an `Accelerator` "
                "instantiated first: `auto` keeps it when compatible with these arguments and otherwise resets it "
                "with a warning, `preserve` keeps it and raises on a conflict, `reset` always resets it (with a "
                "warning). Defaults to the `TRANSFORMERS_ACCELERATOR_STATE_POLICY` environment variable, then `auto`."
            ),
            "choices": ["auto", "preserve", "reset"],
        }},
    )
"""

HELPERS = '''    def _resolve_accelerator_state_policy(self) -> str:
        policy = self.accelerator_state_policy
        if policy is None:
            policy = os.environ.get("TRANSFORMERS_ACCELERATOR_STATE_POLICY", "auto")
        if policy not in ("auto", "preserve", "reset"):
            raise ValueError(
                f"`accelerator_state_policy` (or `TRANSFORMERS_ACCELERATOR_STATE_POLICY`) must be one of 'auto', "
                f"'preserve' or 'reset', got {policy!r}."
            )
        return policy

    def _accelerator_state_conflicts(self) -> list[str]:
        """
        Lists how the accelerator state that already exists differs from what these arguments ask for.
        """
        state = PartialState()
        conflicts = []
        if (self.use_cpu or strtobool(os.environ.get("ACCELERATE_USE_CPU", "False"))) and state.device.type != "cpu":
            conflicts.append(f"the existing state runs on `{state.device}` but `use_cpu=True`")
        # `AcceleratorState` may refine the type (FSDP) in its own copy of the state
        distributed_type = AcceleratorState._shared_state.get("distributed_type", state.distributed_type)
        if self.deepspeed or self.fsdp:
            # their plugins only take effect in a state built for them
            conflicts.append("`deepspeed` or `fsdp` is set and needs a state built from these arguments")
        elif distributed_type in (DistributedType.DEEPSPEED, DistributedType.FSDP):
            conflicts.append(f"the existing state is `{distributed_type}` but neither `deepspeed` nor `fsdp` is set")
        if self.ddp_backend is not None and state.backend is not None and state.backend != self.ddp_backend:
            conflicts.append(f"the existing state uses backend `{state.backend}` but `ddp_backend={self.ddp_backend}`")
        state_mixed_precision = AcceleratorState._shared_state.get("_mixed_precision")
        mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        mixed_precision = "fp16" if self.fp16 else "bf16" if self.bf16 else mixed_precision
        if state_mixed_precision is not None and state_mixed_precision != mixed_precision:
            conflicts.append(
                f"the existing state uses mixed precision `{state_mixed_precision}` but these arguments ask for "
                f"`{mixed_precision}`"
            )
        return conflicts

    def _keep_accelerator_state(self) -> bool:
        """
        Whether `_setup_devices` keeps the accelerator state that already exists, per `accelerator_state_policy`.
        """
        if not PartialState._shared_state:
            return False
        conflicts = self._accelerator_state_conflicts()
        if conflicts and self.accelerator_state_policy == "preserve":
            raise ValueError(
                "`accelerator_state_policy='preserve'` keeps the accelerator state that already exists, but it "
                f"contradicts these arguments: {'; '.join(conflicts)}. Create the `Accelerator` with matching "
                "settings, change the arguments, or use `accelerator_state_policy='reset'` to discard the state."
            )
        if conflicts or self.accelerator_state_policy == "reset":
            reason = "; ".join(conflicts) if conflicts else "`accelerator_state_policy='reset'`"
            logger.warning(
                f"Resetting the existing accelerator state ({reason}): an `Accelerator` created before these "
                "`TrainingArguments` can no longer be used. Create it with matching settings or after them."
            )
            return False
        logger.info(
            f"Keeping the existing accelerator state (accelerator_state_policy={self.accelerator_state_policy!r})."
        )
        return True

'''

RESOLVE = """        self.accelerator_state_policy = self._resolve_accelerator_state_policy()
"""

POP_OLD = """self.accelerator_config.pop(
                "use_configured_state", False
            )"""
POP_NEW = """getattr(
                self.accelerator_config, "use_configured_state", False
            )"""

ELSE_OLD = """        else:
            AcceleratorState._reset_state(reset_partial_state=True)
"""
ELSE_NEW = """        elif self._keep_accelerator_state():
            # From here on, the live state is used as if `use_configured_state=True` had been passed
            accelerator_state_kwargs["use_configured_state"] = True
            self.distributed_state = PartialState()
        else:
            AcceleratorState._reset_state(reset_partial_state=True)
"""


def _replace_once(text, pattern, replacement, what, version, keep_match=False):
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE | re.DOTALL))
    if len(matches) != 1:
        found = "not found" if not matches else f"found {len(matches)} times"
        raise EditError(f"transformers {version}: {TARGET}: anchor for {what} {found}; the patch cannot serve it")
    start, end = matches[0].span()
    if keep_match:
        replacement = text[start:end] + replacement
    return text[:start] + replacement + text[end:]


def _insert_after(text, pattern, insertion, what, version):
    return _replace_once(text, pattern, insertion, what, version, keep_match=True)


def edit(text: str, version: str) -> str:
    """Returns `text` (a pristine `training_args.py` of transformers `version`) with the fix applied."""
    annotation = "Optional[str]" if "    accelerator_config: Optional[" in text else "str | None"
    text = _insert_after(
        text, r"^ +- `?use_configured_state`? \(`bool`.*?(?=\n\n)", DOCSTRING_ENTRY, "the docstring entry", version
    )
    text = _insert_after(
        text,
        r"^    accelerator_config: [^\n]* = field\(\n.*?^    \)\n",
        FIELD.format(annotation=annotation),
        "the field",
        version,
    )
    text = _insert_after(
        text, r"^ +return timedelta\(seconds=self\.ddp_timeout\)\n\n", HELPERS, "the helpers", version
    )
    text = _insert_after(
        text, r'^        logger\.info\("PyTorch: setting up devices"\)\n', RESOLVE, "the policy resolution", version
    )
    text = _replace_once(text, re.escape(POP_OLD), POP_NEW, "the `use_configured_state` read", version)
    text = _replace_once(text, "^" + re.escape(ELSE_OLD), ELSE_NEW, "the state reset", version)
    return text
