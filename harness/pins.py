"""Pinned transformers releases and where their patch series live."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATCHES = ROOT / "patches"


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def load_pins() -> dict[str, str]:
    """Maps each pinned version to the sha256 of its source archive, oldest first."""
    with open(PATCHES / "pins.toml", "rb") as f:
        pins = {version: entry["sha256"] for version, entry in tomllib.load(f).items()}
    return dict(sorted(pins.items(), key=lambda item: version_key(item[0])))


def newest() -> str:
    return list(load_pins())[-1]


def committed_series() -> list[str]:
    """The pinned versions whose series is committed under `patches/<version>/`: the ones the suite runs on."""
    return [version for version in load_pins() if series(version)]


def series(version: str) -> list[Path]:
    """The `git format-patch` files for `version`, in order."""
    return sorted((PATCHES / version).glob("*.patch"))
