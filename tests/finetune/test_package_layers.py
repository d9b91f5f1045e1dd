"""The fine-tuner's packages import in one direction: each room may use the rooms below it, never one above, so no
module needs another that needs it back (an import circle breaks as soon as a module is imported first)."""

import ast
from pathlib import Path

import pytest

from tests.testing_utils import ROOT, same_on_every_line

pytestmark = same_on_every_line  # the package's own imports

# lowest first; a module of a room imports only from its own room and from those listed before it
LAYERS = [
    ("tpu_demo.compat", "tpu_demo.errors", "tpu_demo.cli", "tpu_demo.outputs"),
    ("tpu_demo.model",),
    ("tpu_demo.config",),
    ("tpu_demo.runtime",),
    ("tpu_demo.evaluation",),
    ("tpu_demo.data",),
    ("tpu_demo.segmenting",),
    ("tpu_demo.training",),
]


def room(module: str) -> str:
    return ".".join(module.split(".")[:2])


def imports(path: Path) -> set[str]:
    """The package's modules `path` imports, at its top or inside a function (both run, sooner or later)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tpu_demo"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("tpu_demo")}
    return found


def package_modules() -> dict[str, set[str]]:
    modules = {}
    for path in sorted((ROOT / "tpu_demo").rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = imports(path)
    return modules


def rank(module: str) -> int | None:
    for number, rooms in enumerate(LAYERS):
        if room(module) in rooms:
            return number
    return None  # a command (tpu_demo.train, ...): it may import any room


@pytest.mark.parametrize("module", sorted(package_modules()))
def test_imports_only_rooms_below(module):
    own = rank(module)
    if own is None:
        return
    above = sorted(
        d for d in package_modules()[module] if room(d) != room(module) and (rank(d) is None or rank(d) > own)
    )
    assert not above, f"{module} imports {above}, which sit above it in LAYERS"


def test_every_room_has_a_place():
    rooms = {room(m) for m in package_modules() if m.count(".") >= 2}  # the subpackages
    placed = {r for rooms_of_layer in LAYERS for r in rooms_of_layer}
    assert rooms <= placed, f"rooms without a layer: {sorted(rooms - placed)}"


def test_no_module_imports_itself_back():
    graph = package_modules()

    def reaches(start, goal, seen):
        for name in graph.get(start, ()):
            if name == goal:
                return True
            if name not in seen:
                seen.add(name)
                if reaches(name, goal, seen):
                    return True
        return False

    circles = [module for module in graph if reaches(module, module, set())]
    assert not circles, f"import circles through {circles}"
