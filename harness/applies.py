"""Checks that the series applies to the newest release of every transformers minor line since 4.42.

    python -m harness.applies                 # check, print the table and write it into docs/MATRIX.md
    python -m harness.applies --pin           # first pin (sha256) the newest releases the index has and we do not

Each release's series is generated from `patches/src/` (as for the committed ones) and checked with
`git apply --check` against the verified source archive. The family column fingerprints the code the fix
edits (`_setup_devices` up to the reset, plus the release traits the edit adapts to), so a new family shows
where `tox -m matrix` needs another release.
"""

import argparse
import hashlib
import re
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from harness.archives import TreeError, download, fetch_archive, sha256
from harness.docs import replace_section
from harness.make_patches import generate, load_edit
from harness.pins import PATCHES, ROOT, committed_series, load_pins, version_key
from harness.tree import touched_files

FIRST = (4, 42)  # the first minor line with `use_configured_state`, which the fix builds on


@dataclass
class Row:
    version: str
    applies: bool
    detail: str = ""
    family: str = ""


def index_releases() -> list[str]:
    """The newest patch release of every minor line since `FIRST` that the package index offers."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "transformers"], capture_output=True, text=True, check=True
    ).stdout
    listed = re.search(r"Available versions: (.*)", out).group(1).split(", ")
    newest = {}
    for version in listed:
        if re.fullmatch(r"\d+\.\d+\.\d+", version) and version_key(version)[:2] >= FIRST:
            minor = version_key(version)[:2]
            if minor not in newest or version_key(version) > version_key(newest[minor]):
                newest[minor] = version
    return sorted(newest.values(), key=version_key)


def pin(versions: list[str]) -> list[str]:
    """Downloads each unpinned version (pip checks the index's digest) and records its sha256 in pins.toml."""
    pins, added = load_pins(), []
    for version in versions:
        if version in pins:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            archive = download(version, Path(tmp))
            with open(PATCHES / "pins.toml", "a") as f:
                f.write(f'["{version}"]\nsha256 = "{sha256(archive)}"\n')
        added.append(version)
    return added


def family(text: str, trainer: str) -> str:
    """A fingerprint of the code the edit touches in one release's `training_args.py` and `trainer.py`."""
    region = re.search(r"    def _setup_devices\(self\).*?AcceleratorState\._reset_state\(", text, flags=re.DOTALL)
    create = re.search(
        r"    def create_accelerator_and_postprocess\(self.*?Accelerator\(\*\*args\)", trainer, flags=re.DOTALL
    )
    fingerprint = (region.group(0) if region else "") + (create.group(0) if create else "")
    return hashlib.sha256(fingerprint.encode()).hexdigest()[:8]


def check(version: str) -> Row:
    if version not in load_pins():
        return Row(version, False, "not pinned: run `python -m harness.applies --pin`")
    archive = fetch_archive(version)
    with tarfile.open(archive) as tar:
        text, trainer = (
            tar.extractfile(f"transformers-{version}/{path}").read().decode()
            for path in (load_edit().TARGET, load_edit().TRAINER)
        )
    row = Row(version, False, family=family(text, trainer))
    with tempfile.TemporaryDirectory() as tmp:
        try:
            patches = generate(version, Path(tmp) / "series")
        except load_edit().EditError as error:
            row.detail = str(error)
            return row
        # `git apply --check` reads only the files a patch touches: those are taken from the archive, as they are
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "init", "--quiet", str(tree)], check=True)
        with tarfile.open(archive) as tar:
            names = set(tar.getnames())
            for path in {path for patch in patches for path in touched_files(patch)}:
                if f"transformers-{version}/{path}" in names:
                    (tree / path).parent.mkdir(parents=True, exist_ok=True)
                    (tree / path).write_bytes(tar.extractfile(f"transformers-{version}/{path}").read())
        for patch in patches:
            result = subprocess.run(["git", "-C", str(tree), "apply", "--check", str(patch)], capture_output=True)
            if result.returncode:
                row.detail = f"{patch.name}: {result.stderr.decode().strip().splitlines()[0]}"
                return row
    row.applies = True
    return row


def render(rows: list[Row]) -> str:
    labels, matrix = {}, set(committed_series())
    for row in rows:
        if row.family and row.family not in labels:
            labels[row.family] = f"F{len(labels) + 1}"
    tested = {row.family for row in rows if row.version in matrix}
    lines = [
        "## Does the series apply? The newest release of every minor line",
        "",
        "Generated by `tox -e applies` (`python -m harness.applies`): the series generated from `patches/src/`",
        "for each release, checked with `git apply --check` on its verified source archive. A family is one",
        "version of the code the fix edits; `suite` marks the releases `tox -m matrix` runs the whole suite on.",
        "",
        "| release | applies | family | suite | detail |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        label = labels.get(row.family, "–")
        suite = "yes" if row.version in matrix else ""
        lines.append(f"| {row.version} | {'yes' if row.applies else '**no**'} | {label} | {suite} | {row.detail} |")
    untested = sorted({labels[f] for f in labels if f not in tested}, key=lambda label: int(label[1:]))
    applied = sum(row.applies for row in rows)
    lines += [
        "",
        f"{applied} of {len(rows)} releases take the series; {len(labels)} families, "
        + (f"not run by the suite: {', '.join(untested)}." if untested else "each run by the suite."),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.applies", description=__doc__.splitlines()[0])
    parser.add_argument("--pin", action="store_true", help="first pin the index's newest releases that are not")
    parser.add_argument("--output", type=Path, default=ROOT / "docs/MATRIX.md")
    args = parser.parse_args(argv)
    releases = index_releases()
    if args.pin:
        print(f"pinned: {', '.join(pin(releases)) or 'nothing new'}")
    rows = []
    for version in releases:
        try:
            rows.append(check(version))
        except TreeError as error:
            rows.append(Row(version, False, str(error)))
        print(f"{version}: {'applies' if rows[-1].applies else 'DOES NOT APPLY'} {rows[-1].detail}".rstrip())
    table = render(rows)
    replace_section(args.output, "applies", table)
    print(table)
    return 0 if all(row.applies for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
