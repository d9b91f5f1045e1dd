"""The single source of truth for the `training_args.py` change.

Every pinned transformers release gets its patch by running these anchored edits on its pristine file, so the
per-version diffs cannot drift apart. An anchor that is missing or ambiguous raises `EditError` naming the version.
"""

import re

TARGET = "src/transformers/training_args.py"


class EditError(RuntimeError):
    pass


DOCSTRING_ENTRY = """

        accelerator_state_policy (`str`, *optional*):
            What to do with an accelerator state (`PartialState`/`AcceleratorState`) that already exists when the
            devices are set up, for instance one created by an `Accelerator` instantiated before these arguments:

                - `"auto"`: keep it if it is the state these arguments would get anyway: what a fresh `PartialState`
                  built for them says of the device, distributed setup and process ranks, and the mixed precision,
                  `torch.compile` settings and plugins the `Trainer` would ask for. Otherwise reset it and log a
                  warning naming the differences.
                - `"preserve"`: keep it, and raise a `ValueError` if it differs from that.
                - `"reset"`: always reset it (the behavior before this option existed), logging a warning when a
                  live state is discarded.

            A state that did not finish initializing, or whose process group was destroyed, is always reset. When
            unset, the `TRANSFORMERS_ACCELERATOR_STATE_POLICY` environment variable is used (case-insensitive, empty
            means unset), then `"auto"`. Ignored when `accelerator_config` sets `use_configured_state=True`."""

FIELD = """    accelerator_state_policy: {annotation} = field(
        default=None,
        metadata={{
            "help": (
                "What to do with an accelerator state that already exists, e.g. one created by an `Accelerator` "
                "instantiated first: `auto` keeps it when it is the state these arguments would get anyway and "
                "otherwise resets it with a warning, `preserve` keeps it and raises on a difference, `reset` always "
                "resets it (with a warning). Defaults to the `TRANSFORMERS_ACCELERATOR_STATE_POLICY` environment "
                "variable, then `auto`."
            ),
            "choices": ["auto", "preserve", "reset"],
        }},
    )
"""

HELPERS = """    def _accelerator_state_policy(self) -> str:
        \"\"\"
        The `accelerator_state_policy` in effect; the field keeps `None` when it comes from the environment.
        \"\"\"
        policy, source = self.accelerator_state_policy, "`accelerator_state_policy`"
        if policy is None:
            # an empty variable (e.g. from a CI template) counts as unset
            policy = os.environ.get("TRANSFORMERS_ACCELERATOR_STATE_POLICY", "").strip().lower() or "auto"
            source = "`TRANSFORMERS_ACCELERATOR_STATE_POLICY` (read as `accelerator_state_policy` is unset)"
        if policy not in ("auto", "preserve", "reset"):
            raise ValueError(f"{{source}} must be one of 'auto', 'preserve' or 'reset', got {{policy!r}}.")
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

    @staticmethod
    def _warn_accelerator_state_reset(reason: str, had_accelerator: bool) -> None:
        if had_accelerator:
            consequence = (
                "the `Accelerator` created before these `TrainingArguments` can no longer be used. Create it with "
                "matching settings or after them."
            )
        else:
            consequence = "it was a `PartialState` only (no `Accelerator` existed), rebuilt from these arguments."
        logger.warning(f"Resetting the existing accelerator state ({{reason}}): {{consequence}}")

    def _set_aside_accelerator_state(self, policy: str) -> {optional_states}:
        \"\"\"
        A copy of the accelerator state that exists, before `_setup_devices` resets it to build a fresh one, if it
        may be kept: `_keep_accelerator_state` compares it with the fresh one.
        \"\"\"
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
        \"\"\"
        The `TorchDynamoPlugin` the `Accelerator` of a `Trainer` built with these arguments gets.
        \"\"\"
{dynamo_plugin}
    def _accelerator_state_conflicts(self, partial_state: dict, accelerator_state: dict) -> list[str]:
        \"\"\"
        How a state set aside differs from the fresh `PartialState` just built for these arguments, and from the
        `AcceleratorState` the `Trainer` would build with them (the settings it passes to `Accelerator`).
        \"\"\"
        fresh = PartialState._shared_state
        # every attribute accelerate set, but the `cpu` request (its effect is `device`) and what it reads each time
        conflicts = [
            f"`{{key}}` is `{{partial_state.get(key)}}` but `{{value}}` in a state built for these arguments"
            for key, value in fresh.items()
            if key not in ("_cpu", "fork_launched") and partial_state.get(key) != value
        ]
        if not accelerator_state:
            return conflicts
        if self.deepspeed or self.fsdp:
            # their plugins only take effect in a state built for them
            conflicts.append("`deepspeed` or `fsdp` is set and needs a state built from these arguments")
        elif accelerator_state["distributed_type"] != fresh["distributed_type"]:
            conflicts.append(f"the existing state is `{{accelerator_state['distributed_type']}}`, set by a plugin")
{mixed_precision}        if accelerator_state["_mixed_precision"] != mixed_precision:
            conflicts.append(
                f"the existing state uses mixed precision `{{accelerator_state['_mixed_precision']}}` but these "
                f"arguments ask for `{{mixed_precision}}`"
            )
        kept, expected = accelerator_state["dynamo_plugin"], self._trainer_dynamo_plugin()
        if kept.backend.value != "NO" or expected.backend.value != "NO":  # without a backend nothing is read
            conflicts.extend(
                f"`torch.compile` `{{f.name}}` is `{{getattr(kept, f.name)}}` but `{{getattr(expected, f.name)}}` for "
                "these arguments"
                for f in fields(expected)
                if getattr(kept, f.name) != getattr(expected, f.name)
            )
{parallelism}        return conflicts

    def _keep_accelerator_state(self, existing: tuple[dict, dict], policy: str) -> None:
        \"\"\"
        Puts back the state set aside by `_set_aside_accelerator_state` if it is the state these arguments would get
        anyway; otherwise leaves the fresh one (`"auto"`) or raises (`"preserve"`).
        \"\"\"
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
                f"differs from what these arguments ask for: {{'; '.join(conflicts)}}. Create the `Accelerator` with "
                "matching settings, change the arguments, or use `accelerator_state_policy='reset'` to discard it."
            )
        logger.info(f"Keeping the existing accelerator state (accelerator_state_policy={{policy!r}}).")
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
                f"`ddp_timeout={{self.ddp_timeout}}` cannot be applied: the process group of the existing accelerator "
                "state was created before these arguments. Pass the timeout where it is created, e.g. "
                "`Accelerator(kwargs_handlers=[InitProcessGroupKwargs(timeout=...)])`."
            )

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
# Where the `Trainer` passes its own `TorchDynamoPlugin` to the `Accelerator` (5.x), the same one; before, the
# `Accelerator` builds it from the variables `__post_init__` sets, after it set up the devices (4.x).
DYNAMO_PLUGIN_FROM_TRAINER = """        from accelerate.utils import TorchDynamoPlugin

        if not is_accelerate_available("1.2.0"):
            return TorchDynamoPlugin()
        # as `Trainer._build_accelerator_args` builds it
        return TorchDynamoPlugin(
            backend=self.torch_compile_backend,
            mode=self.torch_compile_mode,
            dynamic=False if self.torch_compile_backend == "neuron" else None,
        )
"""
DYNAMO_PLUGIN_FROM_ENVIRONMENT = """        from accelerate.utils import TorchDynamoPlugin

        # The `Trainer`'s `Accelerator` builds it from the variables `__post_init__` sets after the devices: the
        # backend asked for (`inductor` when only `torch_compile` or a mode is) and the mode; unset ones stay as set
        compiles = self.torch_compile or any(
            setting is not None for setting in (self.torch_compile_backend, self.torch_compile_mode, self.torchdynamo)
        )
        backend = self.torch_compile_backend or self.torchdynamo or ("inductor" if compiles else None)
        return TorchDynamoPlugin(backend=backend, mode=self.torch_compile_mode)
"""

RESOLVE = """        accelerator_state_policy, existing_state = self._accelerator_state_policy(), None
"""

ELSE_OLD = """        else:
            AcceleratorState._reset_state(reset_partial_state=True)
"""
ELSE_NEW = """        else:
            existing_state = self._set_aside_accelerator_state(accelerator_state_policy)
            AcceleratorState._reset_state(reset_partial_state=True)
"""
FRESH_STATE = r"""^            if use_deepspeed:\n                del os\.environ\["ACCELERATE_USE_DEEPSPEED"\]\n"""
KEEP = """            if existing_state is not None:
                self._keep_accelerator_state(existing_state, accelerator_state_policy)
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
        # 5.x's `Trainer` builds the `TorchDynamoPlugin` itself (the variables are a fallback for accelerate < 1.2)
        "dynamo_plugin_from_trainer": 'if not is_accelerate_available("1.2.0"):' in text,
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
        optional_states="Optional[tuple[dict, dict]]" if found["old_typing"] else "tuple[dict, dict] | None",
        dynamo_plugin=(
            DYNAMO_PLUGIN_FROM_TRAINER if found["dynamo_plugin_from_trainer"] else DYNAMO_PLUGIN_FROM_ENVIRONMENT
        ),
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
    text = _insert_after(text, FRESH_STATE, KEEP, "the fresh state", version)
    return text
