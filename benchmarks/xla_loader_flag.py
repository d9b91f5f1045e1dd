"""How often a loop on XLA sees accelerate's end-of-loader flag at a batch that is not the last: a bare `Accelerator`,
no fine-tuner. accelerate's XLA loader (`MpDeviceLoaderWrapper`) iterates in torch_xla's prefetch thread, which
sets the flag when it reads the last batch and clears it once it has handed that batch over, while the loop is
still on an earlier one. `accumulate` then syncs there, and `gather_for_metrics` cuts that batch to the remainder.
The fine-tuner reads neither (docs/TRAINING.md).

    python -m benchmarks.xla_loader_flag [--epochs 200] [--eval-runs 4]

Needs torch_xla (`tox -e tpu` installs it); runs on PJRT's CPU device unless PJRT_DEVICE says otherwise.
"""

import argparse
import collections
import os

import torch


def sync_patterns(accelerator, epochs: int) -> collections.Counter:
    """Epochs of 10 batches, 2 a step: each epoch's sync pattern ('.S.S.S.S.S' when the flag is not seen early)."""
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.randn(83, 4))
    loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=True, drop_last=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    patterns = collections.Counter()
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        accelerator.step = 0  # each epoch starts a step
        pattern = ""
        for (x,) in loader:
            with accelerator.accumulate(model):
                accelerator.backward(model(x).pow(2).mean())
                optimizer.step()
                optimizer.zero_grad()
                pattern += "S" if accelerator.sync_gradients else "."
        patterns[pattern] += 1
    return patterns


def gathered_samples(accelerator, runs: int) -> list[int]:
    """41 evaluation batches of 8 (323 samples): how many `gather_for_metrics` returns in each run."""
    model = accelerator.prepare(torch.nn.Linear(4, 1))
    data = torch.utils.data.TensorDataset(torch.randn(323, 4))
    loader = accelerator.prepare(torch.utils.data.DataLoader(data, batch_size=8))
    counted = []
    for _ in range(runs):
        with torch.no_grad():
            counted.append(sum(accelerator.gather_for_metrics(model(x)).shape[0] for (x,) in loader))
    return counted


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=200)
    parser.add_argument("--eval-runs", type=int, default=4)
    args = parser.parse_args(argv)
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    from accelerate import Accelerator

    accelerator = Accelerator(gradient_accumulation_steps=2)
    patterns = sync_patterns(accelerator, args.epochs)
    expected = ".S.S.S.S.S"
    print(f"accumulate, {args.epochs} epochs of 10 batches: {patterns[expected]} synced as expected ({expected})")
    for pattern, count in patterns.most_common():
        if pattern != expected:
            print(f"  {count} synced as {pattern}")
    counted = gathered_samples(accelerator, args.eval_runs)
    print(f"gather_for_metrics, 323 samples in 41 batches: {', '.join(map(str, counted))} counted")


if __name__ == "__main__":
    main()
