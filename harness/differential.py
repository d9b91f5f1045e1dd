"""Differential check: random programs of state makers, arguments and Trainer runs, patched vs published.

    python -m harness.differential PY_PATCHED PY_PUBLISHED [--programs 150] [--seed 0]

Both interpreters run the same programs (harness/differential_worker.py); every program whose observations
differ is listed with its first differing step and a class: the fix itself, the one deliberate difference
(a kept state is not reconfigured by a later `Accelerator`, see the patch's commit message), or a REGRESSION.
Exit 1 when any regression is found.
"""

import argparse
import json
import random
import subprocess
import sys

from harness.pins import ROOT

WORKER = ROOT / "harness" / "differential_worker.py"
MAKERS = ["Accelerator()", "Accelerator(cpu)", "Accelerator(bf16)", "Accelerator(eager)", "PartialState()"]
ARGUMENTS = ["args()", "args(use_cpu)", "args(bf16)", "args(compile)", "args(configured)", "args(ddp_backend)"]
OTHERS = ["train", "use first accelerator", "use first accelerator", "derive(bf16)", "policy(reset)"]
# what accelerate says when a state was cleared under a live object: the bug of transformers #40376
CLEARED = "This happens if `AcceleratorState._reset_state()` was called"


def programs(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    made = []
    for _ in range(count):
        steps = [rng.choice(MAKERS)]
        for _ in range(rng.randint(2, 6)):
            pool = rng.choice([MAKERS, ARGUMENTS, ARGUMENTS, OTHERS, OTHERS, OTHERS])
            steps.append(rng.choice(pool))
        made.append(steps)
    return made


def observe(python: str, batch: list[list[str]]) -> list[list[str]]:
    result = subprocess.run(
        [python, str(WORKER)], input=json.dumps(batch), capture_output=True, text=True, cwd=ROOT, check=False
    )
    if result.returncode:
        raise SystemExit(f"harness.differential: {python} failed:\n{result.stderr[-3000:]}")
    prefix = "differential: "
    lines = [line.removeprefix(prefix) for line in result.stdout.splitlines() if line.startswith(prefix)]
    return [json.loads(line) for line in lines]


def classify(program: list[str], step: int, patched: dict, published: dict) -> str:
    mine, theirs = patched["observed"][step], published["observed"][step]
    if CLEARED in theirs and mine.startswith("ok"):
        return "fix"  # the published release cleared the state under a live object
    if program[step] in MAKERS and patched["existing"][step] and not published["existing"][step]:
        # the published release had discarded the state: a later Accelerator now shares it (or is refused a
        # change), as accelerate does without transformers in between; see the patch's commit message
        return "deliberate"
    arguments = [i for i in range(step) if program[i] in ARGUMENTS or program[i] == "derive(bf16)"]
    kept_only_here = any(patched["kept"][i] and not published["kept"][i] for i in arguments)
    if program[step] == "train" and arguments and program[arguments[-1]] == "args(configured)" and kept_only_here:
        return "fix"  # `use_configured_state` uses the user's state, which the published release had discarded
    return "REGRESSION"


def compare(batch, patched_runs, published_runs) -> list[dict]:
    differences = []
    for program, patched, published in zip(batch, patched_runs, published_runs, strict=True):
        for index, (mine, theirs) in enumerate(zip(patched["observed"], published["observed"], strict=True)):
            if mine != theirs:
                kind = classify(program, index, patched, published)
                differences.append(dict(program=program, step=index, patched=mine, published=theirs, kind=kind))
                break  # later steps follow from this one
    return differences


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.differential", description=__doc__.splitlines()[0])
    parser.add_argument("patched", help="python of an env with the patched release")
    parser.add_argument("published", help="python of an env with the same release as published")
    parser.add_argument("--programs", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    batch = programs(args.programs, args.seed)
    differences = compare(batch, observe(args.patched, batch), observe(args.published, batch))
    for d in differences:
        shown = " -> ".join(f"[{s}]" if i == d["step"] else s for i, s in enumerate(d["program"]))
        print(f"{d['kind']}: {shown}\n    patched:   {d['patched']}\n    published: {d['published']}")
    kinds = {kind: sum(d["kind"] == kind for d in differences) for kind in ("fix", "deliberate", "REGRESSION")}
    identical = len(batch) - len(differences)
    print(
        f"{len(batch)} programs (seed {args.seed}, {sum(map(len, batch))} steps): {identical} identical, "
        f"{kinds['fix']} fixed (#40376), {kinds['deliberate']} deliberate, {kinds['REGRESSION']} regressions"
    )
    return 1 if kinds["REGRESSION"] else 0


if __name__ == "__main__":
    sys.exit(main())
