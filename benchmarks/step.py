"""The fine-tune's loop against its bare step, and against a plain PyTorch step, at two model sizes.

    python -m benchmarks.step [--sizes 64x2 512x4] [--steps 60] [--warmup 10] [--rounds 3] [--workers 0 2]

Each run is its own process over a tiny Dia (random weights, `hidden x layers`) and the synthetic set:
- `step`: the recipe's model, optimizer and loss through its `train_step`, on batches of its own loader fetched
  before timing: the bare step;
- `plain`: PyTorch alone (forward, backward, clipping, AdamW) on a fresh model of the same size and the same batches;
- `loop W`: the recipe itself (`DiaFineTune.train()`: loader, collation with W `dataloader_num_workers`, the step,
  the logging sums, the XLA counters), its time per step read from its own `step_seconds` log after warm-up.
Prints the time per step of each and the loop's overhead over the bare step (target: within 5% where the step
dominates), and on XLA the compilations after warm-up and device-to-host transfers per step.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from tpu_demo.cli import refuse_unsupported_transformers

BATCH_SIZE = 8
LOG_EVERY = 5
ROOT = Path(__file__).resolve().parents[1]


def recipe(tmp: str, steps: int, warmup: int, hidden: int, layers: int, workers: int = 0):
    """The recipe set up on the synthetic set, as `python -m tpu_demo.train tiny.yaml` with these overrides would."""
    from tpu_demo.config.load import load_raw
    from tpu_demo.training.recipe import DiaFineTune

    overrides = [
        f"output_dir={tmp}/run", f"tiny_hidden_size={hidden}", f"tiny_layers={layers}", "optim=adamw_torch",
        f"max_steps={warmup + steps}", f"logging_steps={LOG_EVERY}", "eval_strategy=no", "save_strategy=no",
        "eval_samples=0", "warmup_steps=0", f"per_device_train_batch_size={BATCH_SIZE}", "report_to=none",
        f"dataloader_num_workers={workers}", "codebook_weights=[4, 1, 1, 1, 1, 1, 1, 1, 1]",
    ]  # fmt: skip
    run = DiaFineTune(load_raw(ROOT / "tpu_demo/configs/tiny.yaml", overrides))
    run.setup()
    return run


def bare_step(mode: str, steps: int, warmup: int, hidden: int, layers: int) -> dict:
    """`step`: the recipe's model, optimizer and loss through `train_step` on batches of its own loader fetched
    before timing; `plain`: PyTorch alone (a fresh model of the same size, AdamW) on the same batches."""
    from accelerate.utils import DistributedType
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model.dia import tiny_config
    from tpu_demo.runtime.xla_counters import counts
    from tpu_demo.training.loop import train_step
    from tpu_demo.training.loss import MODEL_INPUTS

    with tempfile.TemporaryDirectory() as tmp:
        run = recipe(tmp, steps, warmup, hidden, layers)
        accelerator, loss_fn = run.accelerator, run.loss_fn
        data = []
        while len(data) < warmup + steps:
            data.extend(run.train_loader)
        data = data[: warmup + steps]
        on_xla = accelerator.distributed_type == DistributedType.XLA
        model, optimizer = run.model, run.optimizer
        if mode == "plain":
            model = DiaForConditionalGeneration._from_config(tiny_config(hidden, layers)).to(accelerator.device)
            optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        times, at_warmup = [], None
        for i, batch in enumerate(data):
            start = time.perf_counter()
            if mode == "step":
                train_step(accelerator, model, batch, optimizer, None, 1.0, loss_fn, sync=True)
                if on_xla:
                    import torch_xla.core.xla_model as xm

                    xm.mark_step()
                    xm.wait_device_ops()
            else:
                loss = loss_fn(model(**{k: batch[k] for k in MODEL_INPUTS if k != "labels"}).logits, batch["labels"])
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
            times.append(time.perf_counter() - start)
            if i == warmup - 1 and on_xla:
                at_warmup = counts()
        run.cleanup()
    result = {"step_ms": 1000 * statistics.mean(times[warmup:])}
    if at_warmup is not None:
        now = counts()
        result |= {
            "compilations_after_warmup": now[0] - at_warmup[0],
            "transfers_per_step": (now[1] - at_warmup[1]) / steps,
        }
    return result


def recipe_loop(steps: int, warmup: int, hidden: int, layers: int, workers: int) -> dict:
    """The recipe's own loop; its time per step from the `step_seconds` it logs, after the warm-up's windows."""
    with tempfile.TemporaryDirectory() as tmp:
        run = recipe(tmp, steps, warmup, hidden, layers, workers)
        run.train()
        run.cleanup()
        logged = [json.loads(line) for line in Path(tmp, "run/metrics.jsonl").read_text().splitlines()]
    windows = [m for m in logged if "step_seconds" in m and m["step"] > warmup]
    result = {"step_ms": 1000 * statistics.mean(m["step_seconds"] for m in windows)}
    if windows and windows[-1].get("compilations") is not None:
        result["compilations_after_warmup"] = windows[-1]["compilations"] - windows[0]["compilations"]
    return result


def compare(args) -> int:
    rows = []
    for size in args.sizes:
        hidden, layers = (int(n) for n in size.split("x"))
        modes = ["plain", "step", *(f"loop {w}" for w in args.workers)]
        runs = {mode: [] for mode in modes}
        for _ in range(args.rounds):  # alternating, so a slower moment of the machine falls on every mode
            for mode in modes:
                command = [sys.executable, "-m", "benchmarks.step", "--mode", mode, "--sizes", size]
                command += ["--steps", str(args.steps), "--warmup", str(args.warmup)]
                out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=ROOT).stdout
                runs[mode].append(json.loads(out.strip().splitlines()[-1]))
        step_ms = statistics.median(r["step_ms"] for r in runs["step"])
        for mode, results in runs.items():
            ms = statistics.median(r["step_ms"] for r in results)
            xla = results[0].get("compilations_after_warmup")
            rows.append((size, mode, ms, ms / step_ms - 1, xla, results[0].get("transfers_per_step")))
    print(f"{'size':<8}{'run':<9}{'ms/step':>9}{'vs step':>9}{'compiled':>10}{'to host':>9}")
    for size, mode, ms, over, compiled, transfers in rows:
        xla = f"{compiled:>10}{'' if transfers is None else f'{transfers:.2f}':>9}" if compiled is not None else ""
        print(f"{size:<8}{mode:<9}{ms:>9.1f}{over:>+9.1%}{xla}")
    print(f"batch {BATCH_SIZE} synthetic clips; medians of {args.rounds} runs, each the mean of {args.steps} steps")
    print("vs step: the loop's overhead over the bare step (target: within +5% where the step dominates)")
    return 0


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.step", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["64x2", "512x4"], help="model sizes, hidden x layers")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each mode; medians reported")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="dataloader_num_workers of the loop")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        torch.set_num_threads(1)
        hidden, layers = (int(n) for n in args.sizes[0].split("x"))
        if args.mode.startswith("loop"):
            result = recipe_loop(args.steps, args.warmup, hidden, layers, int(args.mode.split()[1]))
        else:
            result = bare_step(args.mode, args.steps, args.warmup, hidden, layers)
        print(json.dumps(result))
        return 0
    return compare(args)


if __name__ == "__main__":
    sys.exit(main())
