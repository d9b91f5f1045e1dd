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
                  backend, `torch.compile` settings, parallelism config, no DeepSpeed or FSDP), otherwise reset it and
                  log a warning naming the differences.
                - `"preserve"`: keep it, and raise a `ValueError` if it contradicts these arguments.
                - `"reset"`: always reset it (the behavior before this option existed), logging a warning when a
                  live state is discarded.

            A state that did not finish initializing, or whose process group was destroyed, is always reset. When
            unset, the `TRANSFORMERS_ACCELERATOR_STATE_POLICY` environment variable is used, then `"auto"`. Ignored
            when `accelerator_config` sets `use_configured_state=True`."""

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

HELPERS = """    def _resolve_accelerator_state_policy(self) -> str:
        policy = self.accelerator_state_policy
        if policy is None:
            policy = os.environ.get("TRANSFORMERS_ACCELERATOR_STATE_POLICY", "auto")
        if policy not in ("auto", "preserve", "reset"):
            raise ValueError(
                f"`accelerator_state_policy` (or `TRANSFORMERS_ACCELERATOR_STATE_POLICY`) must be one of 'auto', "
                f"'preserve' or 'reset', got {{policy!r}}."
            )
        return policy

    @staticmethod
    def _accelerator_state_defect() -> {optional_str}:
        \"\"\"
        Why the accelerator state that already exists cannot be used as it is, or `None` when it can.

        `PartialState` and `AcceleratorState` store their attributes one by one in dicts shared by all instances, so
        an initialization that raised part way (a failed rendezvous, an unsupported setting) leaves a state that looks
        initialized but is not, and `destroy_process_group()` leaves a distributed state without its process group.
        \"\"\"
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
            {distributed_initialized}
        ):
            return "the process group it was created with no longer exists"
        return None

    def _accelerator_state_conflicts(self) -> list[str]:
        \"\"\"
        Lists how the accelerator state that already exists differs from what these arguments ask for.
        \"\"\"
        state = PartialState()
        accelerator_state = AcceleratorState._shared_state  # empty until an `Accelerator` is created
        conflicts = []
        use_cpu = self.use_cpu or strtobool(os.environ.get("ACCELERATE_USE_CPU", "False"))
        if use_cpu and state.device.type != "cpu":
            conflicts.append(f"the existing state runs on `{{state.device}}` but `use_cpu=True`")
        elif not use_cpu and state.device.type == "cpu" and state.default_device.type != "cpu":
            conflicts.append(f"the existing state runs on `cpu` but these arguments use `{{state.default_device}}`")
        # `AcceleratorState` may refine the type (FSDP) in its own copy of the state
        distributed_type = accelerator_state.get("distributed_type", state.distributed_type)
        if self.deepspeed or self.fsdp:
            # their plugins only take effect in a state built for them
            conflicts.append("`deepspeed` or `fsdp` is set and needs a state built from these arguments")
        elif distributed_type in (DistributedType.DEEPSPEED, DistributedType.FSDP):
            conflicts.append(f"the existing state is `{{distributed_type}}` but neither `deepspeed` nor `fsdp` is set")
        if self.ddp_backend is not None and state.backend != self.ddp_backend:
            conflicts.append(f"`ddp_backend={{self.ddp_backend}}` but the existing state uses `{{state.backend}}`")
        if not accelerator_state:
            return conflicts
{mixed_precision}        if accelerator_state["_mixed_precision"] != mixed_precision:
            conflicts.append(
                f"the existing state uses mixed precision `{{accelerator_state['_mixed_precision']}}` but these "
                f"arguments ask for `{{mixed_precision}}`"
            )
        # what the `Trainer` asks `torch.compile` for (`TorchDynamoPlugin` falls back to accelerate's variables)
        backend = (self.torch_compile_backend or os.environ.get("ACCELERATE_DYNAMO_BACKEND", "no")).lower()
        mode = self.torch_compile_mode or os.environ.get("ACCELERATE_DYNAMO_MODE", "default")
        dynamo_plugin = accelerator_state["dynamo_plugin"]
        if dynamo_plugin.backend.value.lower() != backend or (backend != "no" and dynamo_plugin.mode != mode):
            conflicts.append(
                f"the existing state compiles with `torch.compile` backend `{{dynamo_plugin.backend.value.lower()}}` "
                f"(mode `{{dynamo_plugin.mode}}`) but these arguments ask for `{{backend}}` (mode `{{mode}}`)"
            )
{parallelism}        return conflicts

    def _keep_accelerator_state(self) -> bool:
        \"\"\"
        Whether `_setup_devices` keeps the accelerator state that already exists, per `accelerator_state_policy`.
        \"\"\"
        if not PartialState._shared_state:
            return False
        defect = self._accelerator_state_defect()
        if defect is not None:
            # whatever the policy: no `Accelerator` can work with it, and it was always rebuilt here
            logger.warning(f"Resetting the existing accelerator state ({{defect}}): rebuilding it from the arguments.")
            return False
        conflicts = self._accelerator_state_conflicts()
        if conflicts and self.accelerator_state_policy == "preserve":
            raise ValueError(
                "`accelerator_state_policy='preserve'` keeps the accelerator state that already exists, but it "
                f"contradicts these arguments: {{'; '.join(conflicts)}}. Create the `Accelerator` with matching "
                "settings, change the arguments, or use `accelerator_state_policy='reset'` to discard the state."
            )
        if conflicts or self.accelerator_state_policy == "reset":
            reason = "; ".join(conflicts) if conflicts else "`accelerator_state_policy='reset'`"
            logger.warning(
                f"Resetting the existing accelerator state ({{reason}}): an `Accelerator` created before these "
                "`TrainingArguments` can no longer be used. Create it with matching settings or after them."
            )
            return False
        logger.info(
            f"Keeping the existing accelerator state (accelerator_state_policy={{self.accelerator_state_policy!r}})."
        )
        if PartialState._shared_state["distributed_type"] != DistributedType.NO and self.ddp_timeout != 1800:
            # resetting would not help: the process group is only created once, by whoever creates it first
            logger.warning(
                f"`ddp_timeout={{self.ddp_timeout}}` cannot be applied: the process group of the existing accelerator "
                "state was created before these arguments. Pass the timeout where it is created, e.g. "
                "`Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=...)])`."
            )
        return True

"""

# Where the release already resolved the mixed precision before setting up devices (5.x), the check reads it.
MIXED_PRECISION_RESOLVED = """        mixed_precision = self.mixed_precision
"""
MIXED_PRECISION_COMPUTED = """        mixed_precision = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
        mixed_precision = "fp16" if self.fp16 else "bf16" if self.bf16 else mixed_precision
"""
PARALLELISM = """        if accelerator_state.get("parallelism_config") != self.parallelism_config:
            conflicts.append("the existing state has another `parallelism_config` than these arguments")
"""

RESOLVE = """        self.accelerator_state_policy = self._resolve_accelerator_state_policy()
"""

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


def traits(text: str) -> dict[str, bool]:
    """What the edit adapts to in a release's `training_args.py`."""
    return {
        # `Optional[...]` annotations (4.x) or `... | None` (5.x)
        "old_typing": "    accelerator_config: Optional[" in text,
        # 5.x resolves `self.mixed_precision` in `__post_init__`, before the devices are set up
        "mixed_precision_resolved": "  self.mixed_precision = os." in text,
        "parallelism_config": bool(re.search(r"^    parallelism_config: ", text, flags=re.MULTILINE)),
        "distributed_helper": "import _is_torch_distributed_initialized" in text,
    }


def edit(text: str, version: str) -> str:
    """Returns `text` (a pristine `training_args.py` of transformers `version`) with the fix applied."""
    found = traits(text)
    optional_str = "Optional[str]" if found["old_typing"] else "str | None"
    helpers = HELPERS.format(
        optional_str=optional_str,
        distributed_initialized=(
            "_is_torch_distributed_initialized()"
            if found["distributed_helper"]
            else "dist.is_available() and dist.is_initialized()"
        ),
        mixed_precision=MIXED_PRECISION_RESOLVED if found["mixed_precision_resolved"] else MIXED_PRECISION_COMPUTED,
        parallelism=PARALLELISM if found["parallelism_config"] else "",
    )
    text = _insert_after(
        text, r"^ +- `?use_configured_state`? \(`bool`.*?(?=\n\n)", DOCSTRING_ENTRY, "the docstring entry", version
    )
    text = _insert_after(
        text,
        r"^    accelerator_config: [^\n]* = field\(\n.*?^    \)\n",
        FIELD.format(annotation=optional_str),
        "the field",
        version,
    )
    text = _insert_after(
        text, r"^ +return timedelta\(seconds=self\.ddp_timeout\)\n\n", helpers, "the helpers", version
    )
    text = _insert_after(
        text, r'^        logger\.info\("PyTorch: setting up devices"\)\n', RESOLVE, "the policy resolution", version
    )
    text = _replace_once(text, "^" + re.escape(ELSE_OLD), ELSE_NEW, "the state reset", version)
    return text
