"""The harness refuses what is not pinned: another archive, an unpinned version, a series that does not apply."""

import subprocess
import tarfile

import pytest

from harness import tree
from harness.pins import load_pins, newest

TARGET = "src/transformers/training_args.py"


def test_archive_with_another_hash_is_refused(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    monkeypatch.setattr(tree, "load_pins", lambda: {"9.9.9": "0" * 64})

    def fake_download(cmd, check):  # stands in for `pip download`: an archive with other content
        source = tmp_path / "setup.py"
        source.write_text("print('not the pinned release')\n")
        with tarfile.open(f"{cmd[cmd.index('--dest') + 1]}/transformers-9.9.9.tar.gz", "w:gz") as tar:
            tar.add(source, arcname="transformers-9.9.9/setup.py")

    monkeypatch.setattr(tree.subprocess, "run", fake_download)
    with pytest.raises(SystemExit, match="transformers 9.9.9: archive sha256 .* does not match the pin 0{64}"):
        tree.fetch_archive("9.9.9")
    assert list(cache.iterdir()) == []  # nothing unverified is cached


def test_unpinned_version_is_refused():
    with pytest.raises(SystemExit, match=f"transformers 1.0.0 is not pinned .*{newest()}"):
        tree.fetch_archive("1.0.0")


def test_every_pin_has_a_series():
    assert all(tree.series(version) for version in load_pins())


def test_series_that_does_not_apply_fails_loudly_and_changes_nothing(tmp_path):
    target = tmp_path / TARGET
    target.parent.mkdir(parents=True)
    original = "# a training_args.py the series was not made for\n"
    target.write_text(original)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    version = newest()
    with pytest.raises(
        SystemExit, match=rf"transformers {version}: patches/{version}/0001-.* does not apply to {TARGET}"
    ):
        tree.apply_series(tmp_path, version)
    assert target.read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", "src"]  # the test file was not added either
