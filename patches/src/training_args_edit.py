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
METHODS = Path(__file__).with_name("training_args_methods.py")


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

ELSE_OLD = """        else:
            AcceleratorState._reset_state(reset_partial_state=True)
"""
FRESH_STATE = r"""^            if use_deepspeed:\n                del os\.environ\["ACCELERATE_USE_DEEPSPEED"\]\n"""


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


def _optional_annotations(source: str) -> str:
    """`source` with its `X | None` annotations written `Optional[X]`, as 4.x releases write them."""
    lines = source.splitlines(keepends=True)
    annotations = [
        node.returns if isinstance(node, ast.FunctionDef) else node.annotation
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AnnAssign | ast.arg)
    ]
    optional = [
        node
        for node in annotations
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.BitOr)
        and isinstance(node.right, ast.Constant)
        and node.right.value is None
    ]
    # from the last, so that the offsets of the others hold; ast counts them in UTF-8 bytes
    for node in sorted(optional, key=lambda node: (node.lineno, node.col_offset), reverse=True):
        line = lines[node.lineno - 1].encode()
        written = f"Optional[{ast.get_source_segment(source, node.left)}]".encode()
        lines[node.lineno - 1] = (line[: node.col_offset] + written + line[node.end_col_offset :]).decode()
    return "".join(lines)


def _members(cls: ast.ClassDef) -> dict[str, ast.stmt]:
    """The fields and methods of `cls` by name."""
    return {
        node.target.id if isinstance(node, ast.AnnAssign) else node.name: node
        for node in cls.body
        if isinstance(node, ast.AnnAssign | ast.FunctionDef)
    }


def inserted_code(found: dict[str, bool]) -> tuple[str, str, list[str]]:
    """The field, the helper methods and the `_setup_devices` statements, from `METHODS` in the release's form."""
    source = METHODS.read_text()
    if found["old_typing"]:
        source = _optional_annotations(source)
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
    setup_devices = [lines_of(node) for node in newest.pop("_setup_devices").body]
    methods = {name: lines_of(node) for name, node in newest.items()}
    if not found["dynamo_plugin_from_trainer"]:
        methods["_trainer_dynamo_plugin"] = lines_of(older["_trainer_dynamo_plugin"])
    conflicts = newest["_accelerator_state_conflicts"]
    if not found["mixed_precision_resolved"]:
        computed = older["computed_mixed_precision"].body
        methods[conflicts.name] = swap(
            methods[conflicts.name], statement(conflicts, "mixed_precision = "), lines_of(computed[0], computed[-1])
        )
    if not found["parallelism_config"]:
        methods[conflicts.name] = swap(
            methods[conflicts.name], statement(conflicts, 'if accelerator_state.get("parallelism_config")'), ""
        )
    if not found["distributed_helper"]:
        (returned,) = older["distributed_initialized"].body
        methods["_accelerator_state_defect"] = swap(
            methods["_accelerator_state_defect"],
            "_is_torch_distributed_initialized()",
            ast.get_source_segment(source, returned.value),
        )
    return field, "\n".join(methods.values()) + "\n", setup_devices


def edit(text: str, version: str) -> str:
    """Returns `text` (a pristine `training_args.py` of transformers `version`) with the fix applied."""
    field, helpers, (resolve, set_aside, keep) = inserted_code(traits(text))
    text = _insert_after(
        text, r"^ +- `?use_configured_state`? \(`bool`.*?(?=\n\n)", DOCSTRING_ENTRY, "the docstring entry", version
    )
    text = _insert_after(text, r"^    accelerator_config: [^\n]* = field\(\n.*?^    \)\n", field, "the field", version)
    text = _insert_after(
        text, r"^ +return timedelta\(seconds=self\.ddp_timeout\)\n\n", helpers, "the helpers", version
    )
    text = _insert_after(
        text, r'^        logger\.info\("PyTorch: setting up devices"\)\n', resolve, "the policy resolution", version
    )
    # the reset stays, as the `else:` branch; the state is set aside before it
    else_line, reset_line = ELSE_OLD.splitlines(keepends=True)
    else_new = else_line + textwrap.indent(set_aside, "    ") + reset_line
    text = _replace_once(text, "^" + re.escape(ELSE_OLD), else_new, "the state reset", version)
    text = _insert_after(text, FRESH_STATE, textwrap.indent(keep, "    "), "the fresh state", version)
    return text
