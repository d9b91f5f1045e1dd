"""The single source of truth for the `training_args.py` change.

Every pinned transformers release gets its patch by running these anchored edits on its pristine file, so the
per-version diffs cannot drift apart. An anchor that is missing or ambiguous raises `EditError` naming the version.
The code the edits insert is real Python in `training_args_methods.py` (linted there), copied in the release's form.
"""

import ast
import re
import textwrap
from pathlib import Path

TARGET = "src/transformers/training_args.py"
TRAINER = "src/transformers/trainer.py"
METHODS = Path(__file__).with_name("training_args_methods.py")


class EditError(RuntimeError):
    pass


DOCSTRING_ENTRY = """

        accelerator_state_policy (`str`, *optional*, defaults to `"auto"`):
            What to do with an accelerator state that exists before these arguments, e.g. an `Accelerator`'s. `"auto"`
            keeps it if each setting is what these arguments and a `Trainer` using them create, else resets it, with a
            warning if an `Accelerator` made it. `"preserve"` keeps it and raises a `ValueError` if it differs.
            `"reset"` always resets it, as before this option. Ignored with `use_configured_state`."""

ELSE_OLD = """        else:
            AcceleratorState._reset_state(reset_partial_state=True)
"""
FRESH_STATE = r"""^            if use_deepspeed:\n                del os\.environ\["ACCELERATE_USE_DEEPSPEED"\]\n"""
# 5.x's `Trainer._build_accelerator_args` builds its `TorchDynamoPlugin` (group 1: the call)
TRAINER_PLUGIN = (
    r"^            from accelerate\.utils import TorchDynamoPlugin\n\n"
    r"            dynamo_plugin = (TorchDynamoPlugin\(\n.*?^            \))\n"
    r'            args\["dynamo_plugin"\] = dynamo_plugin\n'
)


def _replace_once(text, pattern, replacement, what, version, path=TARGET, keep_match=False):
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE | re.DOTALL))
    if len(matches) != 1:
        found = "not found" if not matches else f"found {len(matches)} times"
        raise EditError(f"transformers {version}: {path}: anchor for {what} {found}; the patch cannot serve it")
    start, end = matches[0].span()
    if keep_match:
        replacement = text[start:end] + replacement
    return text[:start] + replacement + text[end:]


def _insert_after(text, pattern, insertion, what, version):
    return _replace_once(text, pattern, insertion, what, version, keep_match=True)


def traits(text: str, trainer: str) -> dict[str, bool]:
    """What the edit adapts to in a release's `training_args.py` and `trainer.py`."""
    return {
        # 5.x resolves `self.mixed_precision` in `__post_init__`, before the devices are set up
        "mixed_precision_resolved": "  self.mixed_precision = os." in text,
        "parallelism_config": bool(re.search(r"^    parallelism_config: ", text, flags=re.MULTILINE)),
        # 5.x's `Trainer` builds the `TorchDynamoPlugin` itself; before, its `Accelerator` reads the variables
        "trainer_builds_dynamo_plugin": bool(re.search(TRAINER_PLUGIN, trainer, flags=re.MULTILINE | re.DOTALL)),
        # 4.50+ passes its `Accelerator` the tensor parallelism of the model (or of `tp_size`)
        "trainer_reads_tensor_parallelism": "tp_size" in trainer,
    }


def _members(cls: ast.ClassDef) -> dict[str, ast.stmt]:
    """The fields and methods of `cls` by name."""
    return {
        node.target.id if isinstance(node, ast.AnnAssign) else node.name: node
        for node in cls.body
        if isinstance(node, ast.AnnAssign | ast.FunctionDef)
    }


def inserted_code(found: dict[str, bool], trainer_plugin: str = "") -> tuple[str, str, list[str]]:
    """The field, the helper methods and the `_setup_devices` statements, from `METHODS` in the release's form.
    `trainer_plugin` is the `TorchDynamoPlugin(...)` call of the release's `Trainer`, which the helper takes over."""
    source = METHODS.read_text()
    lines = source.splitlines(keepends=True)
    classes = {node.name: node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}
    newest, older = (_members(classes[name]) for name in ("TrainingArguments", "OlderReleases"))

    def lines_of(first: ast.AST, last: ast.AST | None = None) -> str:
        decorators = getattr(first, "decorator_list", [])
        return "".join(lines[(decorators or [first])[0].lineno - 1 : (last or first).end_lineno])

    def statement(function: ast.FunctionDef, start: str) -> str:
        (node,) = [node for node in function.body if ast.get_source_segment(source, node).startswith(start)]
        return lines_of(node)

    def swap(text: str, old: str, new: str) -> str:
        if text.count(old) != 1:
            raise ValueError(f"{METHODS.name}: {old!r} is not in the method once")
        return text.replace(old, new)

    field = lines_of(newest.pop("accelerator_state_policy"))
    validate = "".join(lines_of(node) for node in newest.pop("_validate_args").body) + "\n"
    setup_devices = [validate] + [lines_of(node) for node in newest.pop("_setup_devices").body]
    methods = {name: lines_of(node) for name, node in newest.items()}
    plugin, keep = newest["_torch_dynamo_plugin"], newest["_keep_accelerator_state"]
    if not found["trainer_builds_dynamo_plugin"]:
        methods[plugin.name] = lines_of(older[plugin.name])
    elif trainer_plugin:
        # the `Trainer`'s own call, moved: it calls this helper instead
        moved = "        return " + trainer_plugin.replace("\n    ", "\n").replace("self.args.", "self.") + "\n"
        methods[plugin.name] = swap(methods[plugin.name], statement(plugin, "return "), moved)
    if not found["mixed_precision_resolved"]:
        (computed,) = older["computed_mixed_precision"].body
        expression = ast.get_source_segment(source, computed.value)
        methods[keep.name] = swap(
            methods[keep.name], "self.mixed_precision\n", f"(\n                {expression}\n            )\n"
        )
    if not found["parallelism_config"]:
        methods[keep.name] = swap(
            methods[keep.name], "parallelism_config=self.parallelism_config", "parallelism_config=None"
        )
    return field, "\n".join(methods.values()) + "\n", setup_devices


def edit_trainer(trainer: str, version: str) -> tuple[str, str]:
    """`trainer.py` calling the arguments' `_torch_dynamo_plugin` and, where it reads a model's tensor parallelism,
    resetting a state that differs from it; and the `TorchDynamoPlugin` call it made (empty where it made none)."""
    match = re.search(TRAINER_PLUGIN, trainer, flags=re.MULTILINE | re.DOTALL)
    if "tp_size" in trainer:
        source = METHODS.read_text()
        (cls,) = [node for node in ast.parse(source).body if getattr(node, "name", None) == "Trainer"]
        (loop,) = cls.body[-1].body
        check = "".join(source.splitlines(keepends=True)[loop.lineno - 2 : loop.end_lineno])  # and its comment
        anchor = r"^(?=        self\.accelerator = Accelerator\(\*\*args\)\n)"
        trainer = _replace_once(trainer, anchor, check, "the tensor parallelism check", version, TRAINER, True)
    if match is None:
        return trainer, ""
    call = '            args["dynamo_plugin"] = self.args._torch_dynamo_plugin()\n'
    return _replace_once(trainer, TRAINER_PLUGIN, call, "the dynamo plugin", version, TRAINER), match.group(1)


def edit(text: str, version: str, trainer: str) -> str:
    """Returns `text` (a pristine `training_args.py` of transformers `version`) with the fix applied; `trainer` is the
    release's pristine `trainer.py`."""
    field, helpers, (validate, set_aside, keep) = inserted_code(
        traits(text, trainer), edit_trainer(trainer, version)[1]
    )
    text = _insert_after(
        text, r"^ +- `?use_configured_state`? \(`bool`.*?(?=\n\n)", DOCSTRING_ENTRY, "the docstring entry", version
    )
    text = _insert_after(text, r"^    accelerator_config: [^\n]* = field\(\n.*?^    \)\n", field, "the field", version)
    text = _insert_after(
        text, r"^ +return timedelta\(seconds=self\.ddp_timeout\)\n\n", helpers, "the helpers", version
    )
    # before the first of the release's value checks, in `_validate_args` (5.14+) or `__post_init__`
    comments = r"(?:        #[^\n]*\n)*"
    check = r"        if self\.logging_strategy == IntervalStrategy\.STEPS and self\.logging_steps == 0:"
    text = _insert_after(text, rf"^\n(?={comments}{check})", validate, "the policy check", version)
    # the reset stays, as the `else:` branch; the state is set aside before it
    else_line, reset_line = ELSE_OLD.splitlines(keepends=True)
    else_new = else_line + textwrap.indent(set_aside, "    ") + reset_line
    text = _replace_once(text, "^" + re.escape(ELSE_OLD), else_new, "the state reset", version)
    text = _insert_after(text, FRESH_STATE, textwrap.indent(keep, "    "), "the fresh state", version)
    return text
