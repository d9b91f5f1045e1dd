"""`harness.deepspeed_wheel`: the patched and unpatched envs install one DeepSpeed wheel per set of compiled ops;
pip's own cache had installed a wheel built with other `DS_BUILD_*` variables, without the ops the launches load."""

import subprocess
from pathlib import Path

import pytest

from harness import deepspeed_wheel as deepspeed


@pytest.fixture
def pip_calls(monkeypatch):
    """pip's commands, run as a stand-in: `wheel -w DIR` writes a wheel there, `install` does nothing."""
    calls = []

    def run(cmd, check):
        calls.append(cmd[3])
        if cmd[3] == "wheel":
            folder = cmd[cmd.index("-w") + 1]
            Path(folder).mkdir(parents=True)
            (Path(folder) / "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl").write_bytes(b"wheel")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(deepspeed.subprocess, "run", run)
    return calls


def test_the_build_key_is_the_ds_build_variables_and_torch():
    ops = {"DS_BUILD_OPS": "0", "DS_BUILD_SHM_COMM": "1", "PATH": "/bin"}
    key = deepspeed.build_key(ops)
    assert key.startswith("python==3.") and " torch==" in key and key.endswith(" DS_BUILD_OPS=0 DS_BUILD_SHM_COMM=1")
    assert deepspeed.build_key({**ops, "DS_BUILD_FUSED_ADAM": "1"}) != key
    assert deepspeed.build_key({**ops, "PATH": "/usr/bin"}) == key


def test_a_wheel_is_built_once_per_set_of_ops_and_installed_in_each_env(tmp_path, monkeypatch, pip_calls):
    monkeypatch.setenv("DS_BUILD_SHM_COMM", "1")
    monkeypatch.delenv("DS_BUILD_FUSED_ADAM", raising=False)
    assert deepspeed.main(["0.19.8", str(tmp_path)]) == 0
    assert deepspeed.main(["0.19.8", str(tmp_path)]) == 0
    assert pip_calls == ["wheel", "install", "install"]
    monkeypatch.setenv("DS_BUILD_FUSED_ADAM", "1")  # another set of ops: its own build
    assert deepspeed.main(["0.19.8", str(tmp_path)]) == 0
    assert pip_calls[3:] == ["wheel", "install"]
    assert len(list(tmp_path.glob("deepspeed-0.19.8-*/*.whl"))) == 2


def test_a_build_killed_half_way_is_built_again(tmp_path, pip_calls):
    folder = deepspeed.wheel_folder(tmp_path, "0.19.8", deepspeed.build_key())
    ended = subprocess.Popen(["true"])  # the process that built it, killed
    ended.wait()
    partial = folder.with_name(f"{folder.name}.partial-{ended.pid}")
    partial.mkdir()
    (partial / "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl").write_bytes(b"half")
    assert deepspeed.main(["0.19.8", str(tmp_path)]) == 0
    assert pip_calls == ["wheel", "install"]
    assert (folder / "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl").read_bytes() == b"wheel"
    assert not partial.exists()


def test_a_build_another_env_finished_first_is_the_one_installed(tmp_path, monkeypatch, pip_calls):
    folder = deepspeed.wheel_folder(tmp_path, "0.19.8", deepspeed.build_key())
    built = deepspeed.subprocess.run

    def built_alongside(cmd, check):
        if cmd[3] == "wheel":  # the other env renames its build into place while this one builds
            folder.mkdir(parents=True)
            (folder / "deepspeed-0.19.8-cp311-cp311-linux_x86_64.whl").write_bytes(b"theirs")
        return built(cmd, check)

    monkeypatch.setattr(deepspeed.subprocess, "run", built_alongside)
    assert deepspeed.main(["0.19.8", str(tmp_path)]) == 0
    assert pip_calls == ["wheel", "install"]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # this build's folder removed


def test_without_arguments_the_version_and_folder_are_the_envs(tmp_path, monkeypatch, pip_calls):
    # tox.ini sets them for patched and unpatched; `.ci/run` builds the wheel in an installed env before the run
    monkeypatch.setenv("DEEPSPEED_VERSION", "0.19.8")
    monkeypatch.setenv("DEEPSPEED_WHEELS", str(tmp_path))
    assert deepspeed.main([]) == 0
    assert pip_calls == ["wheel", "install"]
    assert len(list(tmp_path.glob("deepspeed-0.19.8-*/*.whl"))) == 1
