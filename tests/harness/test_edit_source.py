"""The code the fix inserts is real Python (patches/src/training_args_methods.py) that `training_args_edit` copies
into each release. Needs neither transformers nor the network: the releases' archives come from the harness's cache
(skipped where absent)."""

import functools
import re
import subprocess

import pytest

from harness import archives, make_patches
from harness.pins import committed_series, load_pins, series

EDIT = make_patches.load_edit()
OLDEST_AND_NEWEST = [committed_series()[0], committed_series()[-1]]


@functools.cache
def pristine(version: str) -> dict[str, str]:
    archive = archives.cache_dir() / f"transformers-{version}.tar.gz"
    if not archive.exists() or archives.sha256(archive) != load_pins()[version]:
        pytest.skip(
            f"no verified archive of transformers {version} in {archive.parent}: make_patches --check fetches it"
        )
    return {path: make_patches.pristine(version, path) for path in EDIT.FILES}


def test_the_inserted_code_compiles_where_it_goes():
    code = EDIT.inserted_code()
    compile("".join(code["module"].values()), "module", "exec")
    for cls in ("AcceleratorConfig", "TrainingArguments", "Trainer"):
        members = {name: text for name, text in code[cls].items() if isinstance(text, str)}
        compile(f"class {cls}:\n" + "\n".join(members.values()), cls, "exec")
    set_aside, keep = code["TrainingArguments"]["_setup_devices"]
    compile("def _setup_devices(self):\n" + set_aside + keep, "_setup_devices", "exec")
    (around,) = code["Trainer"]["__init__"]
    assert EDIT.CREATE.strip() in around  # the call it wraps
    compile("def __init__(self):\n" + around, "__init__", "exec")
    assert "noqa" not in EDIT.edit_trainer(pristine(committed_series()[-1])[EDIT.TRAINER], "newest")


@pytest.mark.parametrize("version", OLDEST_AND_NEWEST)
def test_the_edit_gives_what_the_committed_fix_gives(version, tmp_path):
    files = pristine(version)
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "apply", str(series(version)[0])], check=True)
    for path, text in EDIT.edit_all(files, version).items():
        assert text == (tmp_path / path).read_text(), path


@pytest.mark.parametrize(
    "path, anchor, what, found",
    [
        (EDIT.TARGET, EDIT.ELSE_RESET, "the state reset", "found 2 times"),
        (EDIT.TARGET, '                del os.environ["ACCELERATE_USE_DEEPSPEED"]\n', "the fresh state", "not found"),
        (EDIT.TRAINER, EDIT.ACCELERATOR, "the accelerator", "found 2 times"),
        (EDIT.CONFIG, "    use_configured_state: bool = field(\n", "the key", "not found"),
    ],
)
def test_an_anchor_not_found_once_names_the_release_and_the_file(path, anchor, what, found):
    version = committed_series()[-1]
    files = dict(pristine(version))
    assert files[path].count(anchor) == 1
    files[path] = files[path].replace(anchor, "" if found == "not found" else anchor + anchor)
    expected = f"transformers {version}: {path}: anchor for {what} {found}"
    with pytest.raises(EDIT.EditError, match=re.escape(expected)):
        EDIT.edit_all(files, version)


def test_each_hand_mutant_finds_its_text_once_in_the_newest_release():
    from harness import hand_mutants

    version = committed_series()[-1]
    files = EDIT.edit_all(pristine(version), version)
    for name, path, edits in hand_mutants.MUTANTS:
        for old, _ in edits:
            assert files[path].count(old) == 1, name
