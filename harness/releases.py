"""The releases the suite runs on have one source, the committed series (`patches/<version>/`); this writes the
places that list them: tox.ini's factors, `matrix` label and extras, and the CI workflow's matrix.

python -m harness.releases           # rewrite those lines
python -m harness.releases --check   # fail if any is stale
"""

import argparse
import re
import sys

from harness.pins import ROOT, committed_series, newest, version_key

TOX, WORKFLOW = ROOT / "tox.ini", ROOT / ".github/workflows/matrix.yml"


def factor(version: str) -> str:
    return "tf" + version.replace(".", "")[:3]  # 4.53.3 -> tf453, 5.14.1 -> tf514


def without_dia() -> list[str]:
    from tpu_demo.compat import FIRST_SUPPORTED

    return [v for v in committed_series() if version_key(v) < version_key(FIRST_SUPPORTED)]


def _block(text: str, pattern: str, lines: list[str], what: str) -> str:
    """`text` with the one run of consecutive lines matching `pattern` replaced by `lines`."""
    runs = list(re.finditer(rf"(?:^{pattern}\n)+", text, flags=re.MULTILINE))
    if len(runs) != 1:
        raise SystemExit(f"harness.releases: {what}: expected one block, found {len(runs)}")
    return text[: runs[0].start()] + "".join(f"{line}\n" for line in lines) + text[runs[0].end() :]


def render_tox(text: str) -> str:
    versions, old = committed_series(), without_dia()
    with_dia_4x = [v for v in versions if v not in old and v.startswith("4.")]
    setenv = [f"    {factor(v)}: TF_VERSION = {'{[pins]newest}' if v == newest() else v}" for v in versions]
    text = _block(text, r"    tf\d+: TF_VERSION = \S+", setenv, "tox.ini setenv")
    text = _block(
        text,
        r"    matrix = .*",
        [f"    matrix = {{patched,unpatched}}-tf{{{','.join(factor(v)[2:] for v in versions)}}}"],
        "label",
    )
    excluded = "-".join(f"!{factor(v)}" for v in old)
    extras = [f"    {excluded}: {extra}" for extra in ("asr", "datasets", "lora", "speech")]
    text = _block(text, r"    (?:!tf\d+-?)+: \w+", extras, "tox.ini extras")
    return _block(
        text, r"    (?:tf\d+,?)+: datasets<5", [f"    {','.join(map(factor, with_dia_4x))}: datasets<5"], "deps"
    )


def render_workflow(text: str) -> str:
    envs = [f"          - {kind}-{factor(v)}" for kind in ("patched", "unpatched") for v in committed_series()]
    return _block(text, r"          - (?:un)?patched-tf\d+", envs, "workflow matrix")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.releases", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    check = parser.parse_args(argv).check
    stale = []
    for path, render in ((TOX, render_tox), (WORKFLOW, render_workflow)):
        text = path.read_text()
        if render(text) != text:
            stale.append(path.relative_to(ROOT))
            if not check:
                path.write_text(render(text))
    verb = "stale" if check else "rewritten"
    print(f"harness.releases: {verb}: {', '.join(map(str, stale))}" if stale else "harness.releases: up to date")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
