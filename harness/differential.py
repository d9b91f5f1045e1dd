"""Differential check: random programs of state makers, arguments and Trainer runs, patched vs published.

    python -m harness.differential PY_PATCHED PY_PUBLISHED [--programs 150] [--launched 6] [--seed 0]

Both interpreters run the same programs: in one process (harness/differential_worker.py), and under each launcher
(harness/launch_worker.py: `torchrun`, `accelerate launch` plain, with `--use_deepspeed` (ZeRO-2, ZeRO-3) and
with `--use_fsdp` (FSDP2, bf16; FSDP1 needs a GPU's device lookups: tests/patch/test_multiprocess.py mocks them),
2 CPU processes each, `notebook_launcher`, `debug_launcher` and a `multiprocessing` fork child), compared rank by
rank. Half the one-process programs are free; the others take, in turn, orders the fix treats apart: a state made
after the arguments and then a `Trainer`, a half-built state (a failed `Accelerator(fp8)` or bare
`AcceleratorState()`) before them, a later `Accelerator` that asks a kept state for another dynamo backend, and a
kept state met by a `Trainer` subclass that builds its own `Accelerator` (which trains beside the `Trainer` in free
programs too). Every program whose observations differ is listed with its first differing step and a class: the
fix itself, the one deliberate difference (a kept state is not reconfigured by a later `Accelerator` or launched
over, see the patch's commit message), or a REGRESSION. Exit 1 when any regression is found.
"""

import argparse
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.pins import ROOT

WORKER = ROOT / "harness" / "differential_worker.py"
LAUNCH_WORKER = ROOT / "harness" / "launch_worker.py"
MAKERS = ["Accelerator()", "Accelerator(cpu)", "Accelerator(bf16)", "Accelerator(eager)", "PartialState()"]
DYNAMO = "Accelerator(dynamo "  # a maker too: random `TorchDynamoPlugin` options (`dynamo_step`)
# makers that raise after storing part of the state (no transformer_engine or MS-AMP here; no `Accelerator`)
FAILING = ["Accelerator(fp8)", "AcceleratorState()"]
# the makers that pass no `mixed_precision`: on an initialized state accelerate gives them its own
NO_PRECISION = ["Accelerator()", "Accelerator(cpu)", "Accelerator(eager)"]
ARGUMENTS = ["args()", "args(use_cpu)", "args(bf16)", "args(compile)", "args(configured)", "args(ddp_backend)"]
TRAINS = ["train", "train(own accelerator)"]  # the second, a `Trainer` subclass that builds its own `Accelerator`
OTHERS = [*TRAINS, "use first accelerator", "use first accelerator", "derive(bf16)", "policy(reset)"]
# what accelerate says when a state was cleared under a live object: the bug of transformers #40376
CLEARED = "This happens if `AcceleratorState._reset_state()` was called"
# what it says to `AcceleratorState()` where no `Accelerator` completed the state: the same bug, for a bare read
UNINITIALIZED = "ValueError: Please make sure to properly initialize your accelerator via `accelerator = "
# what it says to an `Accelerator` that asks an initialized state for another mixed precision
REFUSED = re.compile(r"ValueError: AcceleratorState has already been initialized .* `mixed_precision='(\w+)'`")


LAUNCHERS = ("torchrun", "accelerate", "deepspeed", "deepspeed3", "fsdp", "notebook", "debug", "fork")
# the launcher starts the worker in every process; the others fork it
IN_RANKS = ("torchrun", "accelerate", "deepspeed", "deepspeed3", "fsdp")
# `accelerate launch` flags (and variables) of the launchers that set up a DeepSpeed or FSDP state
PLUGIN_LAUNCHES = {
    "deepspeed": (["--use_deepspeed", "--zero_stage", "2"], {}),
    "deepspeed3": (["--use_deepspeed", "--zero_stage", "3"], {}),
    # `ACCELERATE_USE_CPU`: what a GPU host's `Accelerator()` finds by itself, one device per process
    "fsdp": (["--use_fsdp", "--fsdp_version", "2", "--mixed_precision", "bf16"], {"ACCELERATE_USE_CPU": "true"}),
}
LAUNCH_MAKERS = ["Accelerator()", "Accelerator(cpu)", "Accelerator(bf16)", "PartialState()"]
LAUNCH_ARGUMENTS = ["args()", "args(use_cpu)", "args(use_cpu)", "args(bf16)"]
LAUNCH_OTHERS = ["replace(use_cpu)", "train", "use first accelerator"]
REFUSED_LAUNCH = "launch ValueError: To launch a multi-device training from your notebook, the `Accelerator`"


def dynamo_step(rng: random.Random, backends=("eager", "eager", "eager", "no")) -> str:
    options = {
        "fullgraph": rng.choice(["True", "False"]),
        "dynamic": rng.choice(["True", "False"]),
        "use_regional_compilation": rng.choice(["True", "False"]),
        "disable": rng.choice(["True", "False", "False"]),
        "mode": rng.choice(["default", "reduce-overhead"]),
    }
    chosen = rng.sample(sorted(options), rng.randint(1, 3))
    backend = rng.choice(backends)
    return DYNAMO + " ".join([backend, *(f"{key}={options[key]}" for key in chosen)]) + ")"


def is_maker(step: str) -> bool:
    return step in MAKERS or step in FAILING or step.startswith(DYNAMO)


def compiles(step: str) -> bool:
    return step == "Accelerator(eager)" or (step.startswith(DYNAMO) and not step.startswith(DYNAMO + "no"))


def free_steps(rng: random.Random, count: int) -> list[str]:
    steps = []
    for _ in range(count):
        step = rng.choice(rng.choice([MAKERS, ["dynamo"], FAILING, ARGUMENTS, ARGUMENTS, OTHERS, OTHERS, OTHERS]))
        steps.append(dynamo_step(rng) if step == "dynamo" else step)
    return steps


def a_maker(rng: random.Random, makers=(*MAKERS, "dynamo", "dynamo")) -> str:
    step = rng.choice(makers)  # a compiling state is where kept settings could leak
    return dynamo_step(rng) if step == "dynamo" else step


def common_arguments(rng: random.Random) -> str:
    return rng.choice(["args()", "args(use_cpu)", rng.choice(ARGUMENTS)])  # the first two keep most states here


def shaped(shape: str, turn: int, rng: random.Random) -> list[str]:
    """The `turn`th program of an order the fix treats apart, and a few free steps after it."""
    if shape == "made after":  # a maker after the arguments, then a `Trainer`: a state made there is accelerate's
        # every combination in turn: the maker, what came before the arguments, the `Trainer`
        later = a_maker(rng, [("Accelerator(bf16)", "Accelerator(eager)", "Accelerator(bf16)", "dynamo")[turn % 4]])
        # none, or a state made before them too, and kept: the later maker joins it, alike in both releases
        kind = ("none", "same", "none", "other")[turn // 4 % 4]
        before = [] if kind == "none" else [later] if kind == "same" else [a_maker(rng)]
        steps = [*before, common_arguments(rng), later, TRAINS[turn // 16 % 2]]
    elif shape == "failed":  # a half-built state before the arguments: never kept
        steps = [rng.choice(FAILING)] + ([a_maker(rng)] if rng.random() < 0.3 else [])
        steps += [common_arguments(rng), rng.choice([*TRAINS, "use first accelerator"])]
    elif shape == "own accelerator":  # a kept state meets the subclass's `Accelerator`, not the `Trainer`'s checks
        steps = [a_maker(rng), common_arguments(rng), "train(own accelerator)"]
    else:  # "other dynamo": a later maker asks a kept state for another dynamo setting, which accelerate ignores
        first = a_maker(rng, (*MAKERS[:4], "dynamo"))  # an `Accelerator`: not `PartialState()`
        if compiles(first):
            later = rng.choice(["Accelerator()", "Accelerator(cpu)", dynamo_step(rng, ("no", "aot_eager"))])
        else:
            later = rng.choice(["Accelerator(eager)", dynamo_step(rng, ("eager", "aot_eager"))])
        steps = [first, common_arguments(rng), later, rng.choice([*TRAINS, "use first accelerator"])]
    return steps + free_steps(rng, rng.randint(0, 2))


# one program in two is free; the others take these shapes in turn, the first (`args()`, `Accelerator(bf16)` or
# `Accelerator(eager)`, then a `Trainer`, and the same after a state made before them) twice as often
SHAPES = [
    s for shape in ("made after", "failed", "other dynamo", "made after", "own accelerator") for s in ("free", shape)
]


def programs(count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    made, turns = [], dict.fromkeys(SHAPES, 0)
    for number in range(count):
        shape = SHAPES[number % len(SHAPES)]
        if shape == "free":
            made.append([a_maker(rng), *free_steps(rng, rng.randint(2, 6))])
        else:
            made.append(shaped(shape, turns[shape], rng))
            turns[shape] += 1
    return made


def launched_programs(launcher: str, count: int, seed: int) -> list[str]:
    """Programs for `launch_worker.py`: steps joined by " ; ", the parent's before " | " for launchers that fork."""
    rng = random.Random(f"{seed}/{launcher}")
    made = []
    for _ in range(count):
        first = [rng.choice(LAUNCH_MAKERS + LAUNCH_ARGUMENTS) for _ in range(rng.randint(1, 2))]
        then = [rng.choice(LAUNCH_ARGUMENTS)]
        then += [rng.choice(LAUNCH_MAKERS + LAUNCH_ARGUMENTS + LAUNCH_OTHERS) for _ in range(rng.randint(0, 2))]
        then += ["train"] if launcher in PLUGIN_LAUNCHES else []  # the Trainer builds its DeepSpeed or FSDP plugin
        made.append(" ; ".join(first) + (" ; " if launcher in IN_RANKS else " | ") + " ; ".join(then))
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


def is_fix(mine: str, theirs: str) -> bool:
    """The published release cleared the state under a live object (which may then fail its own way)."""
    return CLEARED in theirs and CLEARED not in mine


def met_kept_state(program: list[str], step: int, patched: dict, published: dict) -> str:
    """What a maker found in a state only the patched release kept (the published one had discarded it):
    "joined", "refused", "read" (a bare `AcceleratorState()` the published release refused) or ""."""
    before = patched.get("before", [None] * (step + 1))[step]  # `describe` of the state an `Accelerator` completed
    if not (is_maker(program[step]) and before and patched["existing"][step] and not published["existing"][step]):
        return ""
    mine, theirs = patched["observed"][step], published["observed"][step]
    refused = REFUSED.match(mine)
    if refused:  # accelerate refuses an initialized state another mixed precision; any other refusal is not that
        return "refused" if refused.group(1) != before.split("/")[1] else ""
    if mine != "ok: " + before:  # the maker reports the kept state exactly, or it did not join it
        return ""
    if program[step] == "AcceleratorState()" and theirs.startswith(UNINITIALIZED):
        return "read"
    if not theirs.startswith("ok: "):
        return ""
    # the published maker made a fresh state of its own: the two may differ only where accelerate gives a maker
    # the initialized state's setting, the dynamo plugin always (ignored), the mixed precision where it asks none
    fields = ("distributed type", "mixed precision", "device", "dynamo")
    differing = {f for f, a, b in zip(fields, before.split("/", 3), theirs[4:].split("/", 3), strict=True) if a != b}
    asks_precision = program[step] not in NO_PRECISION and not program[step].startswith(DYNAMO)
    return "joined" if differing <= ({"dynamo"} if asks_precision else {"dynamo", "mixed precision"}) else ""


def classify(program: list[str], step: int, patched: dict, published: dict) -> str:
    mine, theirs = patched["observed"][step], published["observed"][step]
    if is_fix(mine, theirs):
        return "fix"
    met = met_kept_state(program, step, patched, published)
    if met == "read":
        return "fix"  # the state the user's `Accelerator` completed is there to read, not discarded (#40376)
    if met:
        # a later `Accelerator` shares the kept state, whose dynamo plugin (and mixed precision, where it asks none)
        # it takes, or is refused another mixed precision, as accelerate does without transformers in between; see
        # the patch's commit message
        return "deliberate"
    arguments = [i for i in range(step) if program[i] in ARGUMENTS or program[i] == "derive(bf16)"]
    kept_only_here = any(patched["kept"][i] and not published["kept"][i] for i in arguments)
    if program[step] == "train" and arguments and program[arguments[-1]] == "args(configured)" and kept_only_here:
        return "fix"  # `use_configured_state` uses the user's state, which the published release had discarded
    if program[step] in TRAINS and arguments and trains_as_asked(mine, program[arguments[-1]], program[step]):
        joined = [i for i in range(arguments[-1] + 1, step) if is_maker(program[i]) and patched["existing"][i]]
        if any(not published["existing"][i] for i in joined):
            # a later `Accelerator` joined the kept state (deliberate, above): the `Trainer` then checks that state
            # against its own arguments and trains as they say, where the published one joined the later state
            return "deliberate"
    return "REGRESSION"


def trains_as_asked(observed: str, arguments: str, train: str) -> bool:
    """The `Trainer` trained with the mixed precision and the compile backend its arguments ask for (a subclass's
    own `Accelerator` is given the precision only, so it may not compile where they ask for it)."""
    precision = "bf16" if arguments == "args(bf16)" else "no"
    backend = "NO"
    if arguments == "args(compile)":
        backend = "EAGER" if train == "train" else "(NO|EAGER)"
    return re.fullmatch(rf"ok: \d+ steps/{precision}/compile {backend}", observed) is not None


def compare(batch, patched_runs, published_runs) -> list[dict]:
    differences = []
    for program, patched, published in zip(batch, patched_runs, published_runs, strict=True):
        for index, (mine, theirs) in enumerate(zip(patched["observed"], published["observed"], strict=True)):
            if mine != theirs:
                kind = classify(program, index, patched, published)
                differences.append(dict(program=program, step=index, patched=mine, published=theirs, kind=kind))
                break  # later steps follow from this one
    return differences


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def has_deepspeed(python: str) -> bool:
    check = [python, "-c", "import importlib.util, sys; sys.exit(not importlib.util.find_spec('deepspeed'))"]
    return subprocess.run(check, capture_output=True).returncode == 0


def observe_launched(python: str, launchers: tuple[str, ...], programs_: list[str]) -> dict[str, dict]:
    """Runs `programs_` under `launchers` (one, or several that fork from one parent) in `python`'s env:
    {launcher: {rank: {program: observations}}}."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if "ACCELERATE" not in k}
    env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as out:
        worker = [str(LAUNCH_WORKER), out, ",".join(launchers), str(port), *programs_]
        if launchers == ("torchrun",):
            cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port), *worker]
        elif launchers == ("accelerate",):
            cmd = [python, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2"]
            cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
            cmd += ["--main_process_port", str(port), *worker]
        elif launchers[0] in PLUGIN_LAUNCHES:
            flags, variables = PLUGIN_LAUNCHES[launchers[0]]
            cmd = [python, "-m", "accelerate.commands.launch", *flags, "--num_processes", "2", "--num_machines", "1"]
            cmd += ["--dynamo_backend", "no", "--main_process_port", str(port), *worker]
            env.update(variables)
        else:
            cmd = [python, *worker]
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=600, check=False)
        if result.returncode:
            raise SystemExit(f"harness.differential: {launchers} in {python} failed:\n{result.stderr[-3000:]}")
        seen = {launcher: {} for launcher in launchers}
        for path in Path(out).glob("*.json"):
            launcher, rank = path.stem.rsplit("-rank", 1)
            seen[launcher][int(rank)] = json.loads(path.read_text())
        return seen


def classify_launched(program: str, step: int, mine: str, theirs: str) -> str:
    if is_fix(mine, theirs):
        return "fix"
    parent = program.partition("|")[0].split(";")
    if mine.startswith(REFUSED_LAUNCH) and any(s.strip().startswith("Accelerator(") for s in parent):
        # the parent's `Accelerator` survived the arguments, and accelerate refuses to launch while one exists
        return "deliberate"
    if not mine.startswith("ok") and not theirs.startswith("ok"):
        return "fails on both"  # not a working program either way (e.g. DeepSpeed's batch check on CPU, unnamed gloo)
    steps = [s.strip() for s in program.replace("|", ";").split(";")]
    trains = step < len(steps) and steps[step] == "train" and mine.startswith("ok") and theirs.startswith("ok")
    if trains and "/DEEPSPEED/" in mine and "/DEEPSPEED/" not in theirs:
        # a state made after the arguments: the published `Trainer` dropped its own DeepSpeed plugin over it
        return "deliberate"
    return "REGRESSION"


def compare_launched(launcher, programs_, patched, published) -> list[dict]:
    differences = []
    for rank in sorted(published.keys() | patched.keys()):
        for program in programs_:
            mine, theirs = patched.get(rank, {}).get(program, []), published.get(rank, {}).get(program, [])
            for index, (a, b) in enumerate(zip(mine, theirs, strict=False)):  # lengths compared below
                if a != b:
                    kind = classify_launched(program, index, a, b)
                    differences.append(
                        dict(
                            program=f"{launcher} rank {rank}: {program}", step=index, patched=a, published=b, kind=kind
                        )
                    )
                    break
            else:
                if len(mine) != len(theirs):
                    differences.append(
                        dict(
                            program=f"{launcher} rank {rank}: {program}",
                            step=min(len(mine), len(theirs)),
                            patched=str(mine),
                            published=str(theirs),
                            kind="REGRESSION",
                        )
                    )
    return differences


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.differential", description=__doc__.splitlines()[0])
    parser.add_argument("patched", help="python of an env with the patched release")
    parser.add_argument("published", help="python of an env with the same release as published")
    parser.add_argument("--programs", type=int, default=150)
    parser.add_argument("--launched", type=int, default=6, help="programs per launcher (0: none)")
    parser.add_argument("--launchers", default=",".join(LAUNCHERS), help="comma-separated, of " + ", ".join(LAUNCHERS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    batch = programs(args.programs, args.seed)
    chosen = args.launchers.split(",") if args.launched else []
    if {"deepspeed", "deepspeed3"} & set(chosen) and not all(map(has_deepspeed, (args.patched, args.published))):
        print("deepspeed: not installed in both envs; its launchers are left out")
        chosen = [name for name in chosen if not name.startswith("deepspeed")]
    # the launchers that fork share one parent process: one interpreter start per release instead of three
    groups = [(name,) for name in chosen if name in IN_RANKS] + [tuple(n for n in chosen if n not in IN_RANKS)]
    groups = [group for group in groups if group]
    launched = {group: launched_programs(group[0], args.launched, args.seed) for group in groups}
    with ThreadPoolExecutor(max_workers=2) as pool:  # a release's runs beside the other's
        runs = {
            (side, group): pool.submit(
                observe if group is None else observe_launched,
                python,
                *(() if group is None else (group,)),
                batch if group is None else launched[group],
            )
            for group in [None, *groups]
            for side, python in (("patched", args.patched), ("published", args.published))
        }
    differences = compare(batch, runs["patched", None].result(), runs["published", None].result())
    for d in differences:
        d["program"] = " -> ".join(f"[{s}]" if i == d["step"] else s for i, s in enumerate(d["program"]))
    lines = [summary(f"in one process: {len(batch)} programs ({sum(map(len, batch))} steps)", len(batch), differences)]
    for group in groups:
        mine, theirs = runs["patched", group].result(), runs["published", group].result()
        for launcher in group:
            found = compare_launched(launcher, launched[group], mine[launcher], theirs[launcher])
            lines.append(
                summary(f"{launcher}: {len(launched[group])} programs x 2 ranks", 2 * len(launched[group]), found)
            )
            differences += found
    for d in differences:
        print(f"{d['kind']}: {d['program']} (step {d['step']})")
        print(f"    patched:   {d['patched']}\n    published: {d['published']}")
    print(f"seed {args.seed}:", *lines, sep="\n  ")
    return 1 if any(d["kind"] == "REGRESSION" for d in differences) else 0


def summary(what: str, count: int, differences: list[dict]) -> str:
    kinds = {d["kind"]: sum(e["kind"] == d["kind"] for e in differences) for d in differences}
    return (
        f"{what}: {count - len(differences)} identical, {kinds.get('fix', 0)} fixed (#40376), "
        f"{kinds.get('deliberate', 0)} deliberate, {kinds.get('fails on both', 0)} failing on both (differently), "
        f"{kinds.get('REGRESSION', 0)} regressions"
    )


if __name__ == "__main__":
    sys.exit(main())
