"""The fine-tune's step: Accelerate (the program's `train_step`) against a plain PyTorch loop.

    python -m benchmarks.step [--steps 150] [--warmup 30] [--rounds 3]

Each loop runs in its own process (so peak memory is its own) over the same tiny Dia and the same batches. Prints
steady-state step time, samples/s, peak RSS and, on XLA, compilations after warm-up and device-to-host transfers per
step, also for `xla-naive`: the loop without what the program does for XLA.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from tpu_demo.cli import refuse_unsupported_transformers


def batches(data_dir, batch_size, count, seed=0):
    from tpu_demo.data.codes import CodesDataset, DiaCollator, write_synthetic
    from tpu_demo.model.dia import DELAY_PATTERN

    dataset = CodesDataset(write_synthetic(data_dir, 64, seed=seed))
    collate = DiaCollator(DELAY_PATTERN, 48, 24, text_dropout=0.0, seed=seed)
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch_size, collate_fn=collate, drop_last=True)
    out = []
    while len(out) < count:
        out.extend(loader)
    return out[:count]


def run_loop(mode: str, steps: int, warmup: int, batch_size: int) -> dict:
    """`plain`: PyTorch alone; `accelerate`: the program's `train_step` and model; `xla-naive` (XLA only): the same
    without what the program does for XLA (sdpa attention with its host-side mask checks instead of the static mask,
    the batch's index tensor kept on the device every step), to show what that care saves."""
    from accelerate import Accelerator
    from accelerate.utils import DistributedType, set_seed
    from transformers import DiaForConditionalGeneration, get_scheduler

    from tpu_demo.model.dia import register_static_mask_attention, tiny_config
    from tpu_demo.runtime.xla_counters import counts
    from tpu_demo.training.loss import MODEL_INPUTS, CodebookLoss
    from tpu_demo.training.optimization import init_optimizer_state
    from tpu_demo.training.recipe import train_step

    set_seed(0)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        data = batches(tmp, batch_size, warmup + steps)
    accelerator = Accelerator() if mode != "plain" else None
    on_xla = accelerator is not None and accelerator.distributed_type == DistributedType.XLA
    options = {"attn_implementation": register_static_mask_attention()} if on_xla and mode == "accelerate" else {}
    model = DiaForConditionalGeneration._from_config(tiny_config(), **options)
    loss_fn = CodebookLoss(model.config.decoder_config.num_channels)  # uniform weights: the model's own loss
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scheduler = get_scheduler("constant", optimizer)
    kept_on_device = []
    if accelerator is not None:
        model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
        init_optimizer_state(optimizer.optimizer)
        data = [{k: torch.as_tensor(v).to(accelerator.device) for k, v in b.items()} for b in data]
    times, at_warmup = [], None
    for i, batch in enumerate(data):
        start = time.perf_counter()
        if accelerator is not None:
            loss, _ = train_step(accelerator, model, batch, optimizer, scheduler, 1.0, loss_fn)
            if mode == "xla-naive":
                kept_on_device.append(batch["index"])
            if on_xla:
                import torch_xla.core.xla_model as xm

                xm.mark_step()
                xm.wait_device_ops()
        else:
            loss = model(**{k: batch[k] for k in MODEL_INPUTS}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
        times.append(time.perf_counter() - start)
        if i == warmup - 1 and on_xla:
            at_warmup = counts()
    steady = times[warmup:]
    result = {
        "mode": mode,
        "device": str(accelerator.device) if accelerator else "cpu",
        "step_ms_median": 1000 * statistics.median(steady),
        "samples_per_s": batch_size / statistics.median(steady),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if at_warmup is not None:
        now = counts()
        result["compilations_after_warmup"] = now[0] - at_warmup[0]
        result["transfers_per_step"] = (now[1] - at_warmup[1]) / steps
    result["final_loss"] = float(loss.detach().cpu())
    return result


def loop_comparison(args) -> int:
    """The Accelerate loop against the plain one (and on XLA against `xla-naive`), each in its own process,
    alternating `rounds` times; medians printed."""
    from accelerate.utils import is_torch_xla_available

    runs = {"plain": [], "accelerate": []}
    if is_torch_xla_available():
        runs["xla-naive"] = []
    for _ in range(args.rounds):
        for mode in runs:
            cmd = [sys.executable, "-m", "benchmarks.step", "--mode", mode, "--steps", str(args.steps)]
            cmd += ["--warmup", str(args.warmup), "--batch-size", str(args.batch_size)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    summary = {}
    for mode, results in runs.items():
        numbers = [key for key, value in results[0].items() if isinstance(value, float | int)]
        summary[mode] = {key: statistics.median(result[key] for result in results) for key in numbers}
        summary[mode]["device"] = results[0]["device"]
    overhead = summary["accelerate"]["step_ms_median"] / summary["plain"]["step_ms_median"] - 1
    print(f"{'loop':<19}{'device':<8}{'step ms':>9}{'samples/s':>11}{'peak RSS MB':>13}{'compiled':>10}{'to host':>9}")
    for mode, s in summary.items():
        xla = ""
        if "compilations_after_warmup" in s:
            xla = f"{s['compilations_after_warmup']:>10.0f}{s['transfers_per_step']:>9.2f}"
        print(
            f"{mode:<19}{s['device']:<8}{s['step_ms_median']:>9.2f}{s['samples_per_s']:>11.1f}"
            f"{s['peak_rss_mb']:>13.0f}{xla}"
        )
    if "xla-naive" in summary:
        print("compiled: XLA graphs compiled after warm-up; to host: device-to-host transfers per step (target: 0, 0)")
    else:
        print(f"Accelerate step time vs plain loop: {overhead:+.1%} (target: within +5% on eager CPU)")
    return 0


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.step", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each loop; medians reported")
    parser.add_argument("--mode", choices=["plain", "accelerate", "xla-naive"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mode:
        print(json.dumps(run_loop(args.mode, args.steps, args.warmup, args.batch_size)))
        return 0
    return loop_comparison(args)


if __name__ == "__main__":
    sys.exit(main())
