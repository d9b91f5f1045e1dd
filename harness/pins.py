"""Pinned transformers releases and where their patch series live."""

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches"


def load_pins() -> dict[str, str]:
    """Maps each pinned version to the sha256 of its source archive, oldest first."""
    with open(PATCHES / "pins.toml", "rb") as f:
        return {version: entry["sha256"] for version, entry in tomllib.load(f).items()}


def newest() -> str:
    return list(load_pins())[-1]


def series(version: str) -> list[Path]:
    """The `git format-patch` files for `version`, in order."""
    return sorted((PATCHES / version).glob("*.patch"))
