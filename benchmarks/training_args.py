"""What the patch costs: time to construct `TrainingArguments`, patched vs unpatched.

python -m benchmarks.training_args PYTHON_PATCHED PYTHON_UNPATCHED   # compare two interpreters
python -m benchmarks.training_args --measure                         # measure the running one
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time


def measure(repeats: int) -> dict:
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState, GradientState
    from transformers import TrainingArguments, __version__

    def reset():
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()

    results = {"transformers": __version__}
    with tempfile.TemporaryDirectory() as out:
        for scenario in ("fresh", "after_accelerator"):
            times = []
            for _ in range(repeats):
                reset()
                if scenario == "after_accelerator":
                    Accelerator(cpu=True)
                start = time.perf_counter()
                TrainingArguments(output_dir=out, report_to="none", use_cpu=True)
                times.append(time.perf_counter() - start)
            results[scenario] = statistics.median(times) * 1e3
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.training_args", description=__doc__.splitlines()[0])
    parser.add_argument("pythons", nargs="*", help="patched and unpatched interpreters")
    parser.add_argument("--measure", action="store_true")
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.repeats)))
        return 0
    if len(args.pythons) != 2:
        parser.error("give the patched and the unpatched interpreter")
    runs = {python: [] for python in args.pythons}
    for _ in range(args.rounds):  # alternate, so drift on a shared machine hits both alike
        for python in args.pythons:
            cmd = [python, "-m", "benchmarks.training_args", "--measure", "--repeats", str(args.repeats)]
            runs[python].append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
    (patched, unpatched) = (
        {key: statistics.median(r[key] for r in runs[python]) for key in ("fresh", "after_accelerator")}
        for python in args.pythons
    )
    version = runs[args.pythons[0]][0]["transformers"]
    print(f"TrainingArguments construction, transformers {version}, median ms of {args.repeats} x {args.rounds}")
    print(f"{'scenario':<20}{'patched':>10}{'unpatched':>12}{'ratio':>8}")
    for key in ("fresh", "after_accelerator"):
        print(f"{key:<20}{patched[key]:>10.3f}{unpatched[key]:>12.3f}{patched[key] / unpatched[key]:>8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
