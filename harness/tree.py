"""Builds and installs a transformers source tree: pinned, verified, and with or without the patch series.

    python -m harness.tree install 5.24.0             # patched, into the running interpreter
    python -m harness.tree install 5.24.0 --unpatched
    python -m harness.tree prepare 5.24.0 DEST        # only the tree
    python -m harness.tree wheel 5.24.0 --dest dist   # an installable wheel, version 5.24.0+accelerator.state

`TRANSFORMERS_SRC=/path/to/transformers` uses a local git checkout instead of the archive; it must already carry
the series (`git am patches/<version>/*.patch`) for a patched install.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from harness.archives import TreeError, fetch_archive
from harness.make_patches import generate
from harness.pins import load_pins, newest, series

STAMP = Path(sys.prefix) / "transformers-tree.stamp"
LOCAL_LABEL = "accelerator.state"  # PEP 440 local version label of the patched builds


def git(tree: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(tree), *args], check=check, capture_output=True, text=True)


def apply_series(tree: Path, version: str) -> None:
    """Applies the series all or nothing: every patch is checked first, and `git apply` never uses fuzz.

    A pinned release without a committed series (one outside the suite's families) gets one generated from the
    same source, exactly as `tox -e applies` checks it.
    """
    patches = series(version)
    if not patches:
        patches = generate(version, Path(tempfile.mkdtemp(prefix="series-")) / version)
    for patch in patches:
        result = git(tree, "apply", "--check", str(patch), check=False)
        if result.returncode:
            raise TreeError(
                f"transformers {version}: patches/{version}/{patch.name} does not apply to "
                f"{', '.join(touched_files(patch))}:\n{result.stderr.strip()}"
            )
    git(tree, "apply", *map(str, patches))


def touched_files(patch: Path) -> list[str]:
    return [line.split(" b/", 1)[1] for line in patch.read_text().splitlines() if line.startswith("diff --git ")]


def prepare(version: str, dest: Path, patched: bool = True) -> Path:
    """Extracts the pinned archive of `version` into `dest` (a fresh git repository) and applies the series."""
    archive = fetch_archive(version)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(archive) as tar:
        top = f"transformers-{version}/"
        members = [m for m in tar.getmembers() if m.name.startswith(top)]
        for member in members:
            member.name = member.name[len(top) :]
        tar.extractall(dest, members=[m for m in members if m.name], filter="data")
    # A repository of its own, so that `git apply` never resolves paths against an enclosing checkout.
    git(dest, "init", "--quiet")
    if patched:
        apply_series(dest, version)
    return dest


def wheel(version: str, dest: Path) -> Path:
    """Builds a wheel of the patched release, versioned `VERSION+accelerator.state` so that pip tells it apart."""
    local_version = f"{version}+{LOCAL_LABEL}"
    with tempfile.TemporaryDirectory() as tmp:
        tree = prepare(version, Path(tmp) / "transformers")
        for path, pattern in (("setup.py", 'version="{}"'), ("src/transformers/__init__.py", '__version__ = "{}"')):
            text = (tree / path).read_text()
            if text.count(pattern.format(version)) != 1:
                raise TreeError(f"transformers {version}: {path}: cannot find {pattern.format(version)} to relabel")
            (tree / path).write_text(text.replace(pattern.format(version), pattern.format(local_version)))
        dest.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dest), str(tree)]
        subprocess.run(cmd, check=True)
    (built,) = dest.glob(f"transformers-{local_version}-*.whl")
    return built


def checkout_state(src: Path, version: str) -> str:
    """Whether a local checkout carries the series: "patched", "unpatched", or raises when neither applies."""
    patches = list(map(str, series(version)))
    if not git(src, "apply", "--check", "--reverse", *patches, check=False).returncode:
        return "patched"
    if not git(src, "apply", "--check", *patches, check=False).returncode:
        return "unpatched"
    raise TreeError(f"{src}: the series of transformers {version} neither applies nor is applied; rebase it")


def install(version: str, patched: bool) -> None:
    src = os.environ.get("TRANSFORMERS_SRC")
    if src:
        state = checkout_state(Path(src), version)
        if state != ("patched" if patched else "unpatched"):
            action = "git am" if patched else "check out the base release of"
            raise TreeError(f"{src} is {state}; {action} patches/{version}/*.patch first")
        key = f"checkout {src} {git(Path(src), 'rev-parse', 'HEAD').stdout.strip()} {state}"
    else:
        digest = hashlib.sha256(b"".join(p.read_bytes() for p in series(version))).hexdigest()
        key = f"{version} {load_pins()[version]} {'patched ' + digest if patched else 'unpatched'}"
    if not src and STAMP.exists() and STAMP.read_text() == key:
        print(f"harness.tree: transformers {version} ({'patched' if patched else 'unpatched'}) already installed")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(src) if src else prepare(version, Path(tmp) / "transformers", patched)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", str(tree)], check=True)
    STAMP.write_text(key)
    print(f"harness.tree: installed transformers {version} ({'patched' if patched else 'unpatched'}) from {tree}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.tree", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["install", "prepare", "wheel"])
    parser.add_argument("version", nargs="?", default=newest())
    parser.add_argument("dest", nargs="?", type=Path, help="target directory for `prepare` (or use --dest)")
    parser.add_argument("--dest", dest="dest_option", type=Path, help="target directory (`wheel`: default ./dist)")
    parser.add_argument("--unpatched", action="store_true", help="leave the release as it is published")
    args = parser.parse_args(argv)
    dest = args.dest_option or args.dest
    if args.action == "prepare" and dest is None:
        parser.error("prepare needs DEST")
    try:
        if args.action == "wheel":
            built = wheel(args.version, dest or Path("dist"))
            print(f"harness.tree: built {built}\ninstall it with: pip install '{built}'")
        elif args.action == "prepare":
            print(prepare(args.version, dest, patched=not args.unpatched))
        else:
            install(args.version, patched=not args.unpatched)
    except TreeError as error:
        sys.exit(f"harness.tree: {error}")


if __name__ == "__main__":
    main()
