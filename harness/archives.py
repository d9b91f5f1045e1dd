"""The source archives of the pinned transformers releases: downloaded once into the cache, checked against the pin."""

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.pins import load_pins


class TreeError(Exception):
    """The harness's one exception: a pin, an archive or a series that is not as promised. `main()`s print it."""


def cache_dir() -> Path:
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "accelerate-state-harness"
    path = Path(os.environ.get("HARNESS_CACHE_DIR", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(version: str, dest: Path) -> Path:
    """Downloads the source archive of `version` into `dest` with pip (which checks the index's digest)."""
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
    subprocess.run([*cmd, "--dest", str(dest), f"transformers=={version}"], check=True)
    (archive,) = dest.glob("transformers-*.tar.gz")
    return archive


def fetch_archive(version: str) -> Path:
    """Returns the verified source archive of `version`, downloading it once into the cache."""
    pins = load_pins()
    if version not in pins:
        raise TreeError(f"transformers {version} is not pinned in patches/pins.toml (pinned: {', '.join(pins)})")
    cached = cache_dir() / f"transformers-{version}.tar.gz"
    if cached.exists() and sha256(cached) == pins[version]:
        return cached
    with tempfile.TemporaryDirectory() as tmp:
        archive = download(version, Path(tmp))
        got = sha256(archive)
        if got != pins[version]:
            raise TreeError(
                f"transformers {version}: archive sha256 {got} does not match the pin {pins[version]}; refusing it"
            )
        shutil.move(archive, cached)
    return cached
