"""The harness refuses what is not pinned: another archive, an unpinned version, a series that does not apply."""

import re
import subprocess
import tarfile

import pytest

from harness import applies, archives, check_patch, differential, make_patches, releases, tree
from harness.archives import TreeError
from harness.docs import replace_section
from harness.pins import PATCHES, committed_series, load_pins, newest, series, version_key

TARGET = "src/transformers/training_args.py"


def test_archive_with_another_hash_is_refused(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    monkeypatch.setattr(archives, "load_pins", lambda: {"9.9.9": "0" * 64})

    def fake_download(cmd, check):  # stands in for `pip download`: an archive with other content
        source = tmp_path / "setup.py"
        source.write_text("print('not the pinned release')\n")
        with tarfile.open(f"{cmd[cmd.index('--dest') + 1]}/transformers-9.9.9.tar.gz", "w:gz") as tar:
            tar.add(source, arcname="transformers-9.9.9/setup.py")

    monkeypatch.setattr(archives.subprocess, "run", fake_download)
    with pytest.raises(TreeError, match="transformers 9.9.9: archive sha256 .* does not match the pin 0{64}"):
        archives.fetch_archive("9.9.9")
    assert list(cache.iterdir()) == []  # nothing unverified is cached


def test_unpinned_version_is_refused():
    with pytest.raises(TreeError, match=f"transformers 1.0.0 is not pinned .*{newest()}"):
        archives.fetch_archive("1.0.0")


def test_every_committed_series_is_pinned_and_the_newest_pin_has_one():
    pins = load_pins()
    committed = sorted(p.name for p in PATCHES.iterdir() if p.is_dir() and p.name != "src")
    assert committed and set(committed) <= set(pins)
    assert tree.series(newest())


def test_applies_names_the_anchor_a_release_lacks(tmp_path, monkeypatch):
    archive = tmp_path / "transformers-9.9.9.tar.gz"
    source = tmp_path / "training_args.py"
    source.write_text("class TrainingArguments:\n    pass\n")  # none of the code the fix edits
    trainer = tmp_path / "trainer.py"
    trainer.write_text("class Trainer:\n    pass\n")
    config = tmp_path / "trainer_pt_utils.py"
    config.write_text("class AcceleratorConfig:\n    pass\n")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=f"transformers-9.9.9/{TARGET}")
        tar.add(trainer, arcname="transformers-9.9.9/src/transformers/trainer.py")
        tar.add(config, arcname="transformers-9.9.9/src/transformers/trainer_pt_utils.py")
    for module in (applies, make_patches):
        monkeypatch.setattr(module, "fetch_archive", lambda version: archive)
    monkeypatch.setattr(applies, "load_pins", lambda: {"9.9.9": "0" * 64})
    row = applies.check("9.9.9")
    assert not row.applies
    expected = "transformers 9.9.9: src/transformers/trainer_pt_utils.py: anchor for the typing import not found"
    assert row.detail.startswith(expected)
    assert "**no**" in applies.render([row])
    assert applies.check("9.9.8").detail.startswith("not pinned")


def test_generated_sections_leave_the_rest_of_the_file_alone(tmp_path):
    doc = tmp_path / "MATRIX.md"
    doc.write_text("# Title\n\nwritten by hand\n")
    replace_section(doc, "applies", "first table")
    replace_section(doc, "scenarios", "second table")
    replace_section(doc, "applies", "new table")
    text = doc.read_text()
    assert text.startswith("# Title\n\nwritten by hand\n")
    assert "new table" in text and "first table" not in text and text.count("second table") == 1
    assert text.index("new table") < text.index("second table")


def test_series_that_does_not_apply_fails_loudly_and_changes_nothing(tmp_path):
    target = tmp_path / TARGET
    target.parent.mkdir(parents=True)
    original = "# a training_args.py the series was not made for\n"
    target.write_text(original)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    version = newest()
    with pytest.raises(
        TreeError, match=rf"transformers {version}: patches/{version}/0001-.* does not apply to .*{TARGET}"
    ):
        tree.apply_series(tmp_path, version)
    assert target.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", "src"]  # the test file was not added either


def test_differential_flags_a_silent_difference_as_a_regression():
    program = ["Accelerator(bf16)", "args()", "train"]
    same = {"observed": ["ok: NO/bf16/cpu/compile NO", "ok: cpu"], "kept": [False, False], "existing": [False, True]}
    published = {**same, "observed": [*same["observed"], "ok: 1 steps/no/compile NO"]}
    patched = {**same, "observed": [*same["observed"], "ok: 1 steps/bf16/compile NO"], "kept": [False, True]}
    (difference,) = differential.compare([program], [patched], [published])
    assert (difference["step"], difference["kind"]) == (2, "REGRESSION")
    cleared = {**published, "observed": [*same["observed"], f"AttributeError: ... {differential.CLEARED} ..."]}
    assert differential.compare([program], [patched], [cleared])[0]["kind"] == "fix"
    assert differential.compare([program], [published], [published]) == []


def test_differential_names_a_trainer_after_a_later_accelerator_deliberate_only_where_it_trains_as_asked():
    # the later `Accelerator` joined the state the arguments kept (published: made a fresh one, which the `Trainer`
    # joined): the patched `Trainer` trains as its arguments say
    program = ["Accelerator(eager)", "args(use_cpu)", "Accelerator(eager)", "train"]
    steps = ["ok: NO/no/cpu/eager", "ok: cpu", "ok: NO/no/cpu/eager"]
    patched = {"observed": [*steps, "ok: 1 steps/no/compile NO"], "existing": [False, True, True, True]}
    published = {"observed": [*steps, "ok: 1 steps/no/compile EAGER"], "existing": [False, True, False, True]}
    patched["kept"] = published["kept"] = [False] * 4
    assert differential.compare([program], [patched], [published])[0]["kind"] == "deliberate"
    patched["observed"][3] = "ok: 1 steps/bf16/compile NO"  # not what `args(use_cpu)` asks for
    assert differential.compare([program], [patched], [published])[0]["kind"] == "REGRESSION"
    patched["observed"][3], published["existing"][2] = "ok: 1 steps/no/compile NO", True  # no kept state joined
    assert differential.compare([program], [patched], [published])[0]["kind"] == "REGRESSION"


def test_a_fix_that_removes_an_upstream_line_is_not_minimal(tmp_path):
    fix, tests = series(newest())
    assert check_patch.check([fix, tests]) == []
    removing = tmp_path / fix.name
    text = fix.read_text()
    removing.write_text(
        text.replace(
            "\n+            self._keep_accelerator_state(*existing_state)",
            "\n-        if False:",
            1,
        )
    )
    assert check_patch.check([removing, tests]) == [f"{fix.name}: removes upstream lines: ['if False:']"]
    assert check_patch.check([fix]) == ["expected 2 patches, found 1"]


def test_every_pinned_series_adds_at_most_the_budget_to_training_args_and_trainer(tmp_path):
    counts = {version: check_patch.added_lines(series(version)[0].read_text()) for version in committed_series()}
    assert all(0 < count <= check_patch.BUDGET for count in counts.values()), counts
    fix, tests = series(newest())
    padded = tmp_path / fix.name
    hunk = "\n+    def _keep_accelerator_state"
    room = check_patch.BUDGET - counts[newest()]
    padded.write_text(fix.read_text().replace(hunk, "\n+" * (room + 1) + hunk, 1))
    assert check_patch.check([padded, tests]) == [
        f"{fix.name}: adds {check_patch.BUDGET + 1} lines to training_args.py and trainer.py, more than 80"
    ]


def test_check_names_only_the_series_that_drifted(monkeypatch, capsys):
    first, second = sorted(load_pins())[:2]

    def regenerated(version, out):  # the committed series, one line changed in the first version's fix
        out.mkdir(parents=True, exist_ok=True)
        for patch in series(version):
            text = patch.read_text()
            (out / patch.name).write_text(text.replace("\n+", "\n+# drift\n+", 1) if version == first else text)
        return sorted(out.glob("*.patch"))

    monkeypatch.setattr(make_patches, "generate", regenerated)
    assert make_patches.main(["--check", first, second]) == 1
    out = capsys.readouterr().out
    assert f"patches/{first}: differs from patches/src" in out and f"patches/{second}: up to date" in out


def test_tox_names_the_newest_pin():
    """tox.ini's `[pins] newest` (every env's default release) is the newest release of patches/pins.toml."""
    import configparser

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(PATCHES.parent / "tox.ini")
    assert tox["pins"]["newest"] == newest()


def test_the_release_lists_are_generated_from_the_committed_series(monkeypatch):
    """tox.ini's factors, label and extras and the CI matrix are written from patches/<version>/ (one source)."""
    for path, render in ((releases.TOX, releases.render_tox), (releases.WORKFLOW, releases.render_workflow)):
        assert render(path.read_text()) == path.read_text(), f"{path.name} is stale: run python -m harness.releases"
    tox = releases.TOX.read_text()
    oldest_dia = min(set(committed_series()) - set(releases.without_dia()), key=version_key)
    assert f"patched-{releases.factor(oldest_dia)}" in tox.split("env_list = ")[1].splitlines()[0]
    # a release added to the series only is seen
    monkeypatch.setattr(releases, "committed_series", lambda: [*committed_series(), "9.9.9"])
    assert "tf999: TF_VERSION = 9.9.9" in releases.render_tox(tox)
    assert "- unpatched-tf999" in releases.render_workflow(releases.WORKFLOW.read_text())


def test_pull_request_is_short_and_states_the_series_figures():
    text = (PATCHES.parent / "docs/PULL_REQUEST.md").read_text()
    assert len(text.splitlines()) <= 80
    section = text.split("<!-- begin numbers (generated) -->\n")[1].split("\n<!-- end numbers -->")[0]
    # the number of cases is pytest's, checked where the file runs (tests/patch/test_upstream_file.py)
    assert re.fullmatch(re.escape(check_patch.numbers(newest())).replace("CASES", r"\d+"), section)
    message = (PATCHES / "src/0001.msg").read_text().splitlines()
    assert len(message[0]) <= 72 and message[1] == "" and len(message[2:]) <= 15
