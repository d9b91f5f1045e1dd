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
