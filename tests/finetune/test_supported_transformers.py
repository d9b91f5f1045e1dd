"""The fine-tuner runs on transformers 4.53 (the first release with Dia) and newer, and refuses an older one at
start-up, in one line that names the first supported release, from every entry point."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.testing_utils import ROOT, TF_VERSION, launch_env
from tpu_demo.compat import FIRST_SUPPORTED

ENTRY_POINTS = [
    "tpu_demo.launch",
    "tpu_demo.train",
    "tpu_demo.prepare",
    "tpu_demo.segment",
    "tpu_demo.generate",
    "benchmarks.step",
    "benchmarks.batching",
    "benchmarks.memory",
    "benchmarks.encoding",
    "benchmarks.generation",
    "benchmarks.voice_prompts",
]


def run_entry_point(module, env):
    args = [sys.executable, "-m", module, str(ROOT / "tpu_demo/configs/tiny.yaml")]
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)


def older_transformers_metadata(folder: Path, version="4.52.4") -> Path:
    """A folder whose package metadata says transformers `version`: first on the path, it is what pip would see."""
    info = folder / f"transformers-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n")
    return folder


def assert_refused(result, version):
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"tpu_demo: transformers {version} has no Dia; the fine-tuner needs transformers {FIRST_SUPPORTED} or newer "
        "(`python -m harness.tree install` installs the newest, with #40376 fixed)"
    ], result.stderr


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_an_older_release_is_refused_in_one_line(module, tmp_path):
    metadata = older_transformers_metadata(tmp_path)
    assert_refused(run_entry_point(module, launch_env(PYTHONPATH=f"{metadata}:{ROOT}")), "4.52.4")


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_an_entry_point_imports_nothing_of_dia_before_it_checks_the_release(module):
    """What a release without Dia would fail to import, before the one-line refusal could be said."""
    code = f"import sys, {module}; print(sorted(name for name in sys.modules if '.dia.' in name or 'Dia' in name))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.skipif(TF_VERSION >= (4, 53), reason="this transformers has Dia")
def test_this_release_is_refused():
    from importlib.metadata import version

    assert_refused(run_entry_point("tpu_demo.train", launch_env()), version("transformers"))


def test_the_first_supported_release_is_what_pip_is_told():
    import tomllib

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"transformers>={FIRST_SUPPORTED.removesuffix('.0')}" in dependencies
