"""The code the fix inserts is real Python (patches/src/training_args_methods.py) that `training_args_edit` copies in
each release's form. Needs neither transformers nor the network: the releases' archives come from the harness's
cache (skipped where absent)."""

import functools
import itertools
import re
import subprocess

import pytest

from harness import archives, make_patches
from harness.pins import committed_series, load_pins, series

EDIT = make_patches.load_edit()
TRAITS = list(EDIT.traits("", ""))
OLDEST_AND_NEWEST = [committed_series()[0], committed_series()[-1]]  # every release variant, then none


@functools.cache
def pristine(version: str) -> str:
    archive = archives.cache_dir() / f"transformers-{version}.tar.gz"
    if not archive.exists() or archives.sha256(archive) != load_pins()[version]:
        pytest.skip(
            f"no verified archive of transformers {version} in {archive.parent}: make_patches --check fetches it"
        )
    return make_patches.pristine(version, EDIT.TARGET), make_patches.pristine(version, EDIT.TRAINER)


@pytest.mark.parametrize("values", list(itertools.product([False, True], repeat=len(TRAITS))))
def test_every_form_of_the_inserted_code_compiles_and_follows_its_traits(values):
    found = dict(zip(TRAITS, values, strict=True))
    field, helpers, setup_devices = EDIT.inserted_code(found)
    compile(f"class TrainingArguments:\n{field}\n{helpers}", "helpers", "exec")
    compile("def _setup_devices(self):\n" + "".join(setup_devices), "setup_devices", "exec")
    assert ("precision = self.mixed_precision\n" in helpers) == found["mixed_precision_resolved"]
    assert ("parallelism_config=self.parallelism_config" in helpers) == found["parallelism_config"]
    assert ("parallelism_config=None" in helpers) != found["parallelism_config"]
    assert ("__post_init__` sets after setting up the devices" in helpers) != found["trainer_builds_dynamo_plugin"]


@pytest.mark.parametrize("version", OLDEST_AND_NEWEST)
def test_the_edit_gives_what_the_committed_fix_gives(version, tmp_path):
    original, trainer = pristine(version)
    for path, text in ((EDIT.TARGET, original), (EDIT.TRAINER, trainer)):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "apply", str(series(version)[0])], check=True)
    assert EDIT.edit(original, version, trainer) == (tmp_path / EDIT.TARGET).read_text()
    assert EDIT.edit_trainer(trainer, version)[0] == (tmp_path / EDIT.TRAINER).read_text()


@pytest.mark.parametrize(
    "anchor, what, found",
    [
        (
            "        if self.logging_strategy == IntervalStrategy.STEPS and self.logging_steps == 0:",
            "the policy check",
            "not found",
        ),
        (EDIT.ELSE_OLD, "the state reset", "found 2 times"),
    ],
)
def test_an_anchor_not_found_once_names_the_release_and_the_file(anchor, what, found):
    version = committed_series()[-1]
    original, trainer = pristine(version)
    assert original.count(anchor) == 1
    changed = original.replace(anchor, "" if found == "not found" else anchor + anchor)
    expected = f"transformers {version}: {EDIT.TARGET}: anchor for {what} {found}"
    with pytest.raises(EDIT.EditError, match=re.escape(expected)):
        EDIT.edit(changed, version, trainer)
