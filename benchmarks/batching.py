"""Target tokens per second of the fine-tune's step, by how its batches are padded.

    python -m benchmarks.batching [--steps 10] [--batch-size 4] [--hidden 256] [--layers 4] [--rounds 3]

A tiny Dia (random weights) trains on clips of 100-400 frames (1.2-4.6 s at 86 frames/s) with the fine-tuner's own
collator, sampler, loss and `train_step` on this CPU. Each way of padding runs in its own process:
- `fixed 1720`: every batch padded to max_audio_frames 1720 (20 s), as before length-aware batches (length_buckets 1);
- `fixed 400`: the same with max_audio_frames 400, just above the longest clip (the reference);
- `longest 1720`: max_audio_frames 1720, each batch padded to its longest clip (`length_buckets: 0`), random order;
- `grouped 1720`: the same in the length-grouped order (`train_sampling_strategy: group_by_length`);
- `buckets 1720`: grouped, padded to one of 4 fixed shapes (`length_buckets: 4`, XLA's default).
Prints target tokens/s, step time, the share of decoder positions that are padding, and each against `fixed 400`
(medians of alternating rounds).
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch

from tpu_demo.cli import refuse_unsupported_transformers

MODES = {  # max_audio_frames, length_buckets, grouped
    "fixed 1720": (1720, 1, False),
    "fixed 400": (400, 1, False),
    "longest 1720": (1720, 0, False),
    "grouped 1720": (1720, 0, True),
    "buckets 1720": (1720, 4, True),
}
TEXT_TOKENS = 128


def clips(count: int, seed: int = 0) -> list[dict]:
    """Clips of 100-400 frames with a text about as long as speech of that length (15 characters a second)."""
    generator = torch.Generator().manual_seed(seed)
    samples = []
    for index in range(count):
        frames = int(torch.randint(100, 401, (), generator=generator))
        codes = torch.randint(0, 1024, (frames, 9), generator=generator)
        samples.append({"index": index, "text": "[S1] " + "a" * (frames * 15 // 86), "codes": codes})
    return samples


def run(mode: str, steps: int, warmup: int, batch_size: int, hidden: int, layers: int) -> dict:
    from accelerate import Accelerator
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.batching import LengthGroupedSampler
    from tpu_demo.data.codes import DiaCollator
    from tpu_demo.model.dia import DELAY_PATTERN, tiny_config
    from tpu_demo.training.loop import train_step
    from tpu_demo.training.loss import CodebookLoss

    max_frames, buckets, grouped = MODES[mode]
    torch.manual_seed(0)
    data = clips(batch_size * (steps + warmup) * 2)
    collate = DiaCollator(DELAY_PATTERN, TEXT_TOKENS, max_frames, 0.0, seed=0, buckets=buckets)
    order = (
        {"sampler": LengthGroupedSampler([len(c["codes"]) for c in data], batch_size, seed=0)}
        if grouped
        else {"shuffle": True, "generator": torch.Generator().manual_seed(0)}
    )
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size, collate_fn=collate, drop_last=True, **order)
    accelerator = Accelerator(cpu=True)
    model = DiaForConditionalGeneration._from_config(tiny_config(hidden, layers))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, optimizer = accelerator.prepare(model, optimizer)
    loss_fn = CodebookLoss(9, [4.0] + [1.0] * 8)
    times, tokens, held, padded = [], 0, 0, 0
    for number, batch in enumerate(loader):
        if number == warmup + steps:
            break
        start = time.perf_counter()
        train_step(accelerator, model, batch, optimizer, None, 1.0, loss_fn, sync=True)
        if number >= warmup:
            times.append(time.perf_counter() - start)
            tokens += int(CodebookLoss.target_tokens(batch["labels"]))
            rows, positions = batch["decoder_input_ids"].shape[:2]
            held += sum(min(f + max(DELAY_PATTERN) + 1, positions) for f in batch["audio_frames"])
            padded += rows * positions
    return {
        "mode": mode,
        "tokens_per_s": tokens / sum(times),
        "step_s_median": statistics.median(times),
        "padding_share": 1 - held / padded,
    }


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.batching", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each mode; medians reported")
    parser.add_argument("--mode", choices=list(MODES), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    sizes = [args.steps, args.warmup, args.batch_size, args.hidden, args.layers]
    if args.mode:
        torch.set_num_threads(1)
        print(json.dumps(run(args.mode, *sizes)))
        return 0
    runs = {mode: [] for mode in MODES}
    for _ in range(args.rounds):  # alternating, so a slower moment of the machine falls on every mode
        for mode in MODES:
            command = [sys.executable, "-m", "benchmarks.batching", "--mode", mode, "--steps", str(args.steps)]
            command += ["--warmup", str(args.warmup), "--batch-size", str(args.batch_size)]
            command += ["--hidden", str(args.hidden), "--layers", str(args.layers)]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    results = {
        mode: {
            key: statistics.median(r[key] for r in rs) for key in ("tokens_per_s", "step_s_median", "padding_share")
        }
        for mode, rs in runs.items()
    }
    reference = results["fixed 400"]["tokens_per_s"]
    print(
        f"tiny Dia hidden {args.hidden}, {args.layers}+{args.layers} layers, batch {args.batch_size}, "
        "clips of 100-400 frames"
    )
    print(f"{'padding':<14}{'tokens/s':>10}{'step s':>9}{'padding share':>15}{'vs fixed 400':>14}")
    for mode, r in results.items():
        ratio = r["tokens_per_s"] / reference
        print(
            f"{mode:<14}{r['tokens_per_s']:>10.0f}{r['step_s_median']:>9.3f}{r['padding_share']:>15.2f}{ratio:>14.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
