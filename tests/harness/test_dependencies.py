"""The dependency ranges the package declares are the ones CI runs: each lower bound is what an env of `tox` pins
(the `tpu` env: the lowest torch and accelerate), and the Python it declares is the one tox runs on."""

import configparser
import re
import sys
import tomllib

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.testing_utils import ROOT


def declared() -> dict[str, SpecifierSet]:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {(r := Requirement(line)).name: r.specifier for line in dependencies}


def pins(env: str) -> dict[str, str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    return dict(re.findall(r"^\s*([\w-]+)==([\w.+]+)\s*$", tox[f"testenv:{env}"]["deps"], re.M))


def lower_bound(specifier: SpecifierSet) -> str:
    (bound,) = [s.version for s in specifier if s.operator == ">="]
    return bound


def test_the_lowest_torch_and_accelerate_declared_run_in_the_tpu_env():
    tpu = pins("tpu")
    for name in ("torch", "accelerate"):
        assert lower_bound(declared()[name]) == tpu[name], f"pyproject's {name} lower bound is not what tox runs"


def test_the_newest_pins_are_inside_the_declared_ranges():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    cpu_torch = re.search(r"torch==([\w.+]+)", tox["testenv"]["deps"]).group(1)
    assert cpu_torch in declared()["torch"]


def test_this_python_is_one_the_package_declares():
    requires = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert ".".join(map(str, sys.version_info[:3])) in requires


def test_every_package_the_segmenter_imports_comes_with_the_package_or_its_audio_and_speech_extras():
    # its message for a missing one says "pip install X, or the fine-tuner's `speech` extra": jiwer was in `asr` only
    import ast
    from importlib.metadata import PackageNotFoundError, packages_distributions, requires

    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    direct = [Requirement(line).name for line in [*project["dependencies"], *extras["audio"], *extras["speech"]]]
    given = {canonicalize_name(name) for name in direct}
    for name in direct:  # and what those installed here need (transformers: numpy, huggingface_hub)
        try:
            needed = [Requirement(line) for line in requires(name) or []]
        except PackageNotFoundError:  # an env without the extra: its imports are named as they are installed
            needed = []
        given |= {canonicalize_name(r.name) for r in needed if not r.marker or "extra" not in str(r.marker)}
    distributions = packages_distributions()
    imported = set()
    for module in [ROOT / "tpu_demo/segment.py", *sorted((ROOT / "tpu_demo/segmenting").glob("*.py"))]:
        for node in ast.walk(ast.parse(module.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            names += [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            imported |= {name.split(".")[0] for name in names}
    third_party = imported - set(sys.stdlib_module_names) - {"tpu_demo"}
    assert third_party and {"jiwer", "onnx", "pocketsphinx"} <= third_party
    missing = {
        name for name in third_party if not given & set(map(canonicalize_name, distributions.get(name, [name])))
    }
    assert not missing, f"the segmenter imports {missing}: in neither the dependencies nor the audio or speech extras"
