"""`harness.prune_envs`: CI's disk is shared, so `.ci/run` removes each tox env once no later env reads it."""

from harness.prune_envs import main


def make_venv(path):
    (path / "bin").mkdir(parents=True)
    (path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (path / "bin" / "python").write_bytes(b"x" * 1024)
    return path


def test_nothing_is_removed_unless_the_run_asks(tmp_path, monkeypatch):
    monkeypatch.delenv("TOX_PRUNE_ENVS", raising=False)
    env = make_venv(tmp_path / "patched-tf453")
    assert main([str(env)]) == 0
    assert (env / "bin" / "python").is_file()


def test_a_virtual_environment_is_removed_and_anything_else_left(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TOX_PRUNE_ENVS", "1")
    env = make_venv(tmp_path / "patched-tf453")
    other = tmp_path / "reports"
    other.mkdir()
    (other / "patched.jsonl").write_text("{}\n")
    assert main([str(env), str(other), str(tmp_path / "absent")]) == 0
    assert not env.exists()
    assert (other / "patched.jsonl").is_file()
    out = capsys.readouterr().out
    assert f"removed {env}" in out
    assert f"{other} is not a virtual environment; left as it is" in out
