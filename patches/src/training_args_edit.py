"""The single source of truth for the change to transformers.

Every pinned transformers release gets its patch by running these anchored edits on its pristine files, so the
per-version diffs cannot drift apart. An anchor that is missing or ambiguous raises `EditError` naming the version.
The code the edits insert is real Python in `training_args_methods.py` (linted there), copied as it stands.
"""

import ast
import re
import textwrap
from pathlib import Path

TARGET = "src/transformers/training_args.py"
TRAINER = "src/transformers/trainer.py"
CONFIG = "src/transformers/trainer_pt_utils.py"
FILES = (CONFIG, TARGET, TRAINER)
METHODS = Path(__file__).with_name("training_args_methods.py")


class EditError(RuntimeError):
    pass


DOCSTRING_ENTRY = """        existing_state (`str`, *optional*, defaults to `"auto"`):
            What `TrainingArguments` do with the state of an `Accelerator` created before them. `"auto"` keeps it if
            its processes and device are the ones the arguments set up, unless a `Trainer` created it; the next
            `Trainer` uses it if its mixed precision and `TorchDynamoPlugin` are the `Trainer`'s and it holds no
            plugin, and otherwise resets it. `"preserve"` keeps it as it is, for the `Trainer` to use as with
            `use_configured_state` (a state other, `"auto"`, arguments kept is still checked). `"reset"` resets it.
            A state a failed initialization left incomplete is always reset.
"""
# the key named in `TrainingArguments`' docstring, under `accelerator_config`, in each release's style
ARGS_DOCSTRING_AFTER = r"^ {16}- `?use_configured_state`? \(`bool`[^\n]*\n(?: {20}[^\n]*\n)*"
ARGS_DOCSTRING_ENTRY = (
    " " * 16 + '- {name} (`"auto"`, `"preserve"` or `"reset"`): Keeps or resets an `Accelerator`\'s state.\n'
)
# where `_setup_devices` caches the device: `functools.cached_property` under its name, transformers' own (up to
# 4.55) under this one
OWN_CACHE = '"__cached__setup_devices"'
TYPING = r"^from typing import ([^\n]*)\n"

# `_setup_devices` reads (pops) `use_configured_state` from the `AcceleratorConfig`
POPPED = r'^ {12}accelerator_state_kwargs\["use_configured_state"\] = self\.accelerator_config\.pop\(\n.*?\n {12}\)\n'
RESET = "            AcceleratorState._reset_state(reset_partial_state=True)\n"
ELSE_RESET = "        else:\n" + RESET
FRESH_STATE = r"""^            if use_deepspeed:\n                del os\.environ\["ACCELERATE_USE_DEEPSPEED"\]\n"""
HELPERS_AFTER = r"^ +return timedelta\(seconds=self\.ddp_timeout\)\n\n"
IMPORTS_AFTER = r"^import warnings\n"
MODULE_AFTER = r"^trainer_log_levels = dict\(\*\*log_levels, passive=-1\)\n"
ACCELERATOR = "        self.accelerator = Accelerator(**args)\n"
# in `Trainer.__init__`, then in `_hp_search_setup`
CREATE = "        self.create_accelerator_and_postprocess()\n"


def _replace_once(text, pattern, replacement, what, version, path=TARGET, keep_match=False):
    matches = list(re.finditer(pattern, text, flags=re.MULTILINE | re.DOTALL))
    if len(matches) != 1:
        found = "not found" if not matches else f"found {len(matches)} times"
        raise EditError(f"transformers {version}: {path}: anchor for {what} {found}; the patch cannot serve it")
    start, end = matches[0].span()
    if keep_match:
        replacement = text[start:end] + replacement
    return text[:start] + replacement + text[end:]


def _insert_after(text, pattern, insertion, what, version, path=TARGET):
    return _replace_once(text, pattern, insertion, what, version, path, keep_match=True)


def _with_comments(lines: list[str], node: ast.stmt) -> str:
    """The source of `node`, with its decorators and the comments right above it."""
    start = (getattr(node, "decorator_list", None) or [node])[0].lineno - 1
    while lines[start - 1].lstrip().startswith("#"):
        start -= 1
    return "".join(lines[start : node.end_lineno])


def inserted_code() -> dict[str, dict[str, str | list[str]]]:
    """The source of each member of each class of `METHODS`: a method or field whole, and for the methods named as
    the release's (`_setup_devices`, `create_accelerator_and_postprocess`) their groups of statements, which blank
    lines separate."""
    source = METHODS.read_text()
    lines = source.splitlines(keepends=True)
    code = {}
    for cls in (node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)):
        members = {}
        for node in cls.body:
            if isinstance(node, ast.Expr):  # the class docstring
                continue
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            members[getattr(node, "name", None) or ast.unparse(target)] = _with_comments(lines, node)
        code[cls.name] = members
    module = [node for node in ast.parse(source).body if isinstance(node, ast.Assign)]
    code["module"] = {
        ast.unparse(node.targets[0]): _with_comments(lines, node)
        for node in module
        if ast.unparse(node.targets[0]) != "logger"
    }
    methods = [("TrainingArguments", "_setup_devices"), ("Trainer", "__init__")]
    for cls, method in methods + [("Trainer", "create_accelerator_and_postprocess")]:
        body = code[cls].pop(method).split("\n", 1)[1]
        groups = [group + "\n" for group in re.split(r"\n\s*\n", body.rstrip("\n"))]
        # a group of comments only says what the statements are for, here
        code[cls][method] = [
            group for group in groups if not all(line.lstrip().startswith("#") for line in group.splitlines())
        ]
    return code


def edit_config(text: str, version: str) -> str:
    """`trainer_pt_utils.py` with the `existing_state` key of `AcceleratorConfig`, documented and validated."""
    members = inserted_code()["AcceleratorConfig"]
    names = re.search(TYPING, text, flags=re.MULTILINE)
    if names is None:
        raise EditError(f"transformers {version}: {CONFIG}: anchor for the typing import not found")
    typing = ", ".join(sorted({*names.group(1).split(", "), "Literal"}))
    text = _replace_once(text, TYPING, f"from typing import {typing}\n", "the typing import", version, CONFIG)
    docstring = r"^        use_configured_state \(`bool.*?hyperparameter tuning\.\n"
    text = _insert_after(text, docstring, DOCSTRING_ENTRY, "the docstring entry", version, CONFIG)
    field = r"^    use_configured_state: bool = field\(\n.*?^    \)\n"
    insertion = "\n" + members["existing_state"] + "\n" + members["__post_init__"]
    return _insert_after(text, field, insertion, "the key", version, CONFIG)


def edit(text: str, version: str) -> str:
    """`training_args.py`: its `_setup_devices` keeps an existing state whose `PartialState` is the one it builds."""
    code = inserted_code()
    set_aside, keep = code["TrainingArguments"].pop("_setup_devices")
    if "from functools import cached_property" not in text:  # transformers' own `cached_property` (up to 4.55)
        method = code["TrainingArguments"]["_reset_kept_accelerator_state"]
        code["TrainingArguments"]["_reset_kept_accelerator_state"] = method.replace(
            '"_setup_devices", None', OWN_CACHE + ", None"
        )
    entry = re.search(ARGS_DOCSTRING_AFTER, text, flags=re.MULTILINE | re.DOTALL)
    name = "`existing_state`" if entry and entry.group(0).lstrip().startswith("- `") else "existing_state"
    text = _insert_after(text, ARGS_DOCSTRING_AFTER, ARGS_DOCSTRING_ENTRY.format(name=name), "the docstring", version)
    text = _insert_after(text, IMPORTS_AFTER, "import weakref\n", "the imports", version)
    text = _insert_after(text, MODULE_AFTER, "\n" + "".join(code["module"].values()), "the module's names", version)
    text = _replace_once(
        text,
        "^" + re.escape(ELSE_RESET),
        "        else:\n" + textwrap.indent(set_aside, "    ") + RESET,
        "the state reset",
        version,
    )
    text = _insert_after(text, FRESH_STATE, textwrap.indent(keep, "    "), "the fresh state", version)
    helpers = "\n".join(code["TrainingArguments"].values())
    return _insert_after(text, HELPERS_AFTER, helpers + "\n", "the helpers", version)


def edit_trainer(text: str, version: str) -> str:
    """`trainer.py`: the `Trainer` resets a state its arguments kept where its own `Accelerator` differs, and notes the
    states it creates."""
    code = inserted_code()["Trainer"]
    (before,) = code.pop("create_accelerator_and_postprocess")
    (around,) = code.pop("__init__")  # the call itself, in a `try` whose `finally` notes the state
    text = _replace_once(text, "^" + re.escape(ACCELERATOR), before + ACCELERATOR, "the accelerator", version, TRAINER)
    calls = len(re.findall("^" + re.escape(CREATE), text, flags=re.MULTILINE))
    if calls != 2:
        raise EditError(f"transformers {version}: {TRAINER}: {calls} calls to create the accelerator, expected 2")
    # `__init__`'s call comes first (the other is `_hp_search_setup`'s)
    text = re.sub("^" + re.escape(CREATE), lambda match: around, text, count=1, flags=re.MULTILINE)
    if "args.update(accelerator_config)" in text:  # accelerate < 0.28 gets the config's keys as its arguments
        popped = '        accelerator_config.pop("gradient_accumulation_kwargs")\n'
        key = '        accelerator_config.pop("existing_state", None)\n'
        text = _insert_after(text, "^" + re.escape(popped), key, "the config's keys", version, TRAINER)
    method = r"^(?=    def create_accelerator_and_postprocess\(self\))"
    return _insert_after(text, method, "\n".join(code.values()) + "\n", "the checks", version, TRAINER)


def edit_all(files: dict[str, str], version: str) -> dict[str, str]:
    """The patched text of each of `FILES`, from the pristine `files` of transformers `version`."""
    return {
        CONFIG: edit_config(files[CONFIG], version),
        TARGET: edit(files[TARGET], version),
        TRAINER: edit_trainer(files[TRAINER], version),
    }
