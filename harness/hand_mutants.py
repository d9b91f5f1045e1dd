"""Hand-written one-line mutants of the fix's decisions, each against the PR's in-process test file (`pytest -x`).

    python -m harness.hand_mutants [VERSION] [--workdir DIR]

mutmut (`harness.mutation`) flips operators and constants; these mutants undo one decision each (the `finally` that
notes a failed `Trainer`'s state, the release of a kept state a `Trainer` took, each log gate, each compared field...),
as a reviewer writes them. A mutant whose text is not found once in the patched tree stops the run: the list follows
the code. Prints a row per mutant and the score; exits 1 if any survives.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.check_patch import TRAINER as TR
from harness.check_patch import TRAINING_ARGS as TA
from harness.mutation import IN_PROCESS
from harness.pins import newest
from harness.tree import prepare
from tests.upstream_layout import assemble

# (what the mutant undoes, the file, [(text, replacement)]); the mutants that only launched tests kill are left to them
MUTANTS = [
    (
        "H1 note only after success (no finally)",
        TR,
        [
            (
                "        try:\n            self.create_accelerator_and_postprocess()\n        finally:",
                "        if True:\n            self.create_accelerator_and_postprocess()\n        if True:",
            )
        ],
    ),
    (
        "H2 a Trainer always counts as having built its Accelerator",
        TR,
        [('_note_trainer_state(hasattr(self, "accelerator"))', "_note_trainer_state(True)")],
    ),
    (
        "H3 a Trainer never takes the kept state",
        TR,
        [('_note_trainer_state(hasattr(self, "accelerator"))', "_note_trainer_state(False)")],
    ),
    (
        "H4 a kept state the Trainer took noted as the Trainer's",
        TA,
        [("if plugin is not None and _kept_states.get(id(plugin)) is not plugin:", "if plugin is not None:")],
    ),
    (
        "H6 the record keeps a state a Trainer took",
        TA,
        [("_kept_states.pop(id(plugin), None)  # a kept", "pass  # a kept")],
    ),
    (
        "H28 a state arguments reset stays in the record",
        TA,
        [("_kept_states.pop(id(plugin), None)  # reset", "pass  # reset")],
    ),
    (
        "H29 a state a Trainer reset stays in the record",
        TA,
        [('_kept_states.pop(id(AcceleratorState._shared_state["dynamo_plugin"]))', "pass")],
    ),
    ("H7 devices compared by type only", TA, [("None in (old.index, new.index):", "True:")]),
    ("H8 device type not compared", TA, [('getattr(old, "type", None) == new.type and', "True and")]),
    ("H9 the Trainer's line ignores log_level", TR, [("level >= self.args.get_process_log_level()", "True")]),
    ("H9b the arguments' line ignores log_level", TA, [("self.get_process_log_level() <= logging.WARNING", "True")]),
    (
        "H10 only the dynamo backend compared",
        TR,
        [('vars(state["dynamo_plugin"]).items()}', 'list(vars(state["dynamo_plugin"]).items())[:1]}')],
    ),
    ("H11 a previous Trainer's state not recognised", TA, [("_trainer_states.get(id(plugin)) is plugin", "False")]),
    ("H12 a state preserve kept is checked by the Trainer", TA, [('if policy == "auto":  # any', "if True:  # any")]),
    (
        "H13 plugins the Trainer passes not counted",
        TR,
        [("if state.get(key) or kwargs.get(key)]", "if state.get(key)]")],
    ),
    (
        "H14 cpu not compared",
        TR,
        [('"cpu": (cpu, cpu or bool(kwargs.get("cpu")))', '"cpu": (cpu, cpu)')],
    ),
    (
        "H30 a state on the CPU not recognised",
        TR,
        [('state["device"].type == "cpu"\n', 'state["device"].type == "XXcpuXX"\n')],
    ),
    (
        "H15 overriding subclasses not reset first",
        TR,
        [
            (
                "if type(self).create_accelerator_and_postprocess is not Trainer.create_accelerator_and_postprocess:",
                "if False:",
            )
        ],
    ),
    ("H16 _n_gpu changed since not restored", TA, [("        self._n_gpu = n_gpu\n", "        pass\n")]),
    (
        "H17 devices not set up again after the reset",
        TA,
        [("        self._setup_devices  # set up again", "        pass  # set up again")],
    ),
    ("H18 no FSDP/Megatron distributed_type skip", TA, [('skip.add("distributed_type")', "pass")]),
    ("H19 _cpu compared", TA, [('PartialState._shared_state, {"_cpu"}', "PartialState._shared_state, set()")]),
    (
        "H20 the subclass line names no use_configured_state",
        TR,
        [
            (
                'reason += " (to reuse it as it is',
                'reason += "" and " (to reuse it as it is',
            )
        ],
    ),
    (
        "H21 preserve resets a differing PartialState",
        TA,
        [('if policy == "preserve" or not differences:', "if not differences:")],
    ),
    ("H22 a half-built state kept", TA, [('or "_mixed_precision" not in state or', "or")]),
    (
        "H26 a kept state taken also by a Trainer that failed before its Accelerator",
        TA,
        [("        elif built_accelerator:", "        elif True:")],
    ),
    (
        "H27 the kept record ignored",
        TA,
        [
            (
                'if _kept_states.get(id(state.get("dynamo_plugin")), False) is state.get("dynamo_plugin")',
                'if "device" in state',
            )
        ],
    ),
]


def mutated(tree: Path, path: str, edits: list[tuple[str, str]]) -> str:
    text = (tree / path).read_text()
    for old, new in edits:
        if text.count(old) != 1:
            raise SystemExit(f"harness.hand_mutants: {path}: {old!r} found {text.count(old)} times, not once")
        text = text.replace(old, new)
    return text


def run(version: str, workdir: Path) -> list[tuple[str, str]]:
    tree = prepare(version, workdir / "transformers")
    assemble(tree)
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree)])}
    pytest = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", IN_PROCESS]
    results = []
    for name, path, edits in MUTANTS:
        pristine = (tree / path).read_text()
        (tree / path).write_text(mutated(tree, path, edits))
        try:
            ran = subprocess.run(pytest, cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
        finally:
            (tree / path).write_text(pristine)
        failed = [
            line.split(" - ")[0].rsplit("::", 1)[-1] for line in ran.stdout.splitlines() if line.startswith("FAILED")
        ]
        results.append((name, f"killed ({failed[0] if failed else 'an error'})" if ran.returncode else "SURVIVED"))
        print(f"| {name} | {results[-1][1]} |", flush=True)
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.hand_mutants", description=__doc__.splitlines()[0])
    parser.add_argument("version", nargs="?", default=newest())
    parser.add_argument("--workdir", type=Path, help="keep the tree here (default: a temp dir)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        results = run(args.version, args.workdir or Path(tmp))
    killed = sum(verdict.startswith("killed") for _, verdict in results)
    print(f"harness.hand_mutants: transformers {args.version}: {killed} of {len(results)} mutants killed")
    return 0 if killed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
