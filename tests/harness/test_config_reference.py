"""docs/CONFIGURATION.md is generated from the argument dataclasses and names every key they have."""

import dataclasses

from harness import config_reference
from tpu_demo.config.arguments import ARGUMENT_CLASSES


def test_configuration_reference_is_up_to_date():
    assert config_reference.OUTPUT.read_text() == config_reference.render(), (
        "docs/CONFIGURATION.md is stale: run `python -m harness.config_reference`"
    )


def test_every_key_has_a_row_with_its_default_and_help():
    text = config_reference.render()
    for cls in ARGUMENT_CLASSES:
        for f in dataclasses.fields(cls) if cls.__module__.startswith("tpu_demo") else ():
            (row,) = [line for line in text.splitlines() if line.startswith(f"| `{f.name}` |")]
            assert row.count("|") >= 4 and not row.endswith("|  |"), row
