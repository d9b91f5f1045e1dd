"""Memory of one training step of the Dia-1.6B architecture (random weights), per precision and optimizer the
fine-tuner offers: measured on layer cuts, extrapolated to the whole model and checked on it (docs/MEMORY_1_6B.md).

    python -m benchmarks.memory [--modes ...] [--layers 2+3 4+6] [--lengths 64+215 128+430] [--json plan.json]
"""

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from tpu_demo.cli import refuse_unsupported_transformers

# --memory: one training step of the Dia-1.6B architecture (random weights), per precision/optimizer the fine-tuner
# offers. Each (mode, layers, length) runs in its own process: ru_maxrss is a process's peak, never reset.
MEMORY_MODES = {  # name: weights dtype, optim, bf16 autocast (mixed_precision: bf16), LoRA
    "full fp32 AdamW": ("float32", "adamw_torch_fused", False, False),
    "full fp32 AdamW, bf16 autocast": ("float32", "adamw_torch_fused", True, False),
    "full fp32 Adafactor": ("float32", "adafactor", False, False),
    "full bf16 AdamW": ("bfloat16", "adamw_torch_fused", False, False),
    "LoRA r16 fp32": ("float32", "adamw_torch_fused", False, True),
    "LoRA r16 bf16": ("bfloat16", "adamw_torch_fused", False, True),
}
CONFIG = Path(__file__).resolve().parents[1] / "tpu_demo/configs/dia-1.6b.yaml"
GB = 1e9


@functools.cache
def full_layers() -> tuple[int, int]:
    """Dia-1.6B's encoder and decoder layers, as `dia_1_6b_config` builds it."""
    from tpu_demo.model.dia import dia_1_6b_config

    config = dia_1_6b_config()
    return config.encoder_config.num_hidden_layers, config.decoder_config.num_hidden_layers


@functools.cache
def config_shape() -> tuple[int, int, int]:
    """The shipped 1.6B config's step: per-device batch, max_text_tokens, max_audio_frames."""
    from tpu_demo.config.load import load_raw

    raw = load_raw(CONFIG)
    return raw["per_device_train_batch_size"], raw["max_text_tokens"], raw["max_audio_frames"]


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def step_tokens(batch_size: int, text_tokens: int, frames: int) -> int:
    """Tokens a batch puts through the model: text, and the delayed frames (BOS + codes + EOS + delay tail - 1)."""
    from tpu_demo.model.dia import DELAY_PATTERN

    return batch_size * (text_tokens + frames + 1 + max(DELAY_PATTERN))


def memory_batch(batch_size: int, text_tokens: int, frames: int) -> dict:
    """A training batch of the fine-tuner's shapes (DiaCollator), every sample as long as the config allows."""
    from tpu_demo.data.codes import DiaCollator
    from tpu_demo.model.dia import DELAY_PATTERN

    generator = torch.Generator().manual_seed(0)
    codes = [torch.randint(0, 1024, (frames, 9), generator=generator) for _ in range(batch_size)]
    samples = [{"index": i, "text": "[S1] " + "a" * text_tokens, "codes": c} for i, c in enumerate(codes)]
    batch = DiaCollator(DELAY_PATTERN, text_tokens, frames, text_dropout=0.0, seed=0)(samples)
    batch.pop("index")
    return batch


def rss() -> int:
    """The process's resident bytes now (Linux), else its peak so far."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def restart_peak() -> None:
    """Linux: the peak RSS starts again from the RSS now (clear_refs 5), so each phase of the step gets its own peak.
    Elsewhere the peaks stay cumulative (each phase then reports the step's peak so far)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def peak() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def optimizer_settings(optim: str):
    """What `make_optimizer` reads of TrainingArguments: the 1.6B config's learning rate, the defaults otherwise."""
    from types import SimpleNamespace

    return SimpleNamespace(optim=optim, learning_rate=1e-5, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999,
                           adam_epsilon=1e-8)  # fmt: skip


def memory_step(mode: str, layers: tuple, shape: tuple, attention: str | None = None) -> dict:
    """One training step (forward with the config's loss, backward, clipping, optimizer step) as `train_step` runs it.
    Bytes over the process's own RSS before the model is built: the peak of each phase, the RSS after the forward
    (what it keeps for the backward), and the exact bytes of weights, gradients and optimizer state."""
    from accelerate.utils import DistributedType
    from transformers import DiaForConditionalGeneration

    from tpu_demo.compat import dtype_keyword
    from tpu_demo.config.arguments import LoraArguments
    from tpu_demo.model.dia import dia_1_6b_config
    from tpu_demo.model.lora import wrap
    from tpu_demo.training.loss import CodebookLoss
    from tpu_demo.training.optimization import init_optimizer_state, make_optimizer

    dtype, optim, autocast, lora = MEMORY_MODES[mode]
    torch.manual_seed(0)
    batch = memory_batch(*shape)
    loss_fn = CodebookLoss(9, [4, 1, 1, 1, 1, 1, 1, 1, 1])  # the config's weights: its loss on the logits
    before = rss()
    options = {dtype_keyword(): getattr(torch, dtype)}  # built in its dtype: no float32 copy first
    if attention:
        options["attn_implementation"] = attention
    model = DiaForConditionalGeneration._from_config(dia_1_6b_config(*layers), **options)
    parameters = sum(p.numel() for p in model.parameters())
    if lora:  # the recipe's wrap; rank 16 (the config sets none), the default targets q/k/v/o_proj
        model = wrap(model, LoraArguments(lora_r=16), "nari-labs/Dia-1.6B-0626")
    model.train()
    optimizer = make_optimizer(optimizer_settings(optim), model, DistributedType.NO)
    init_optimizer_state(optimizer)  # as the recipe: AdamW's moments exist before the first forward
    start, held = time.perf_counter(), rss() - before
    restart_peak()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):  # what accelerate's bf16 does off XLA
        loss = loss_fn.batch_loss(model, batch)
    forward, after_forward = peak() - before, rss() - before
    restart_peak()
    loss.backward()
    backward = peak() - before
    grads = tensor_bytes(p.grad for p in model.parameters())
    restart_peak()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    step = peak() - before
    state = tensor_bytes(v for s in optimizer.state.values() for v in s.values())
    return {
        "mode": mode, "layers": list(layers), "shape": list(shape), "attention": model.config._attn_implementation,
        "parameters": parameters, "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
        "weights": tensor_bytes(model.parameters()), "grads": grads, "optimizer": state, "held": held,
        "after_forward": after_forward, "forward": forward, "backward": backward, "step": step,
        "peak": max(forward, backward, step), "seconds": time.perf_counter() - start, "loss": float(loss),
    }  # fmt: skip


def along(x, points, key):
    """`key` at `x` on the line through two measurements `points` ((x, result), (x, result))."""
    (x1, r1), (x2, r2) = points
    return r1[key] + (x - x1) * (r2[key] - r1[key]) / (x2 - x1)


PHASES = ("forward", "backward", "step")


def extrapolate(results: dict, cuts: list, shapes: list) -> dict:
    """A mode's full 12+18-layer figures from its runs: linear in decoder layers (cuts keep the 12:18 ratio, so each
    layer added adds the same bytes), then each phase's peak linear in a batch's tokens to the config's batch."""
    full = {}
    for shape in shapes:
        points = [(layers[1], results[layers, shape]) for layers in cuts]
        full[shape] = {key: along(full_layers()[1], points, key) for key in (*PHASES, "weights", "grads", "optimizer")}
    at_config = {}
    points = [(step_tokens(*shape), full[shape]) for shape in shapes]
    for phase in PHASES:
        at_config[phase] = along(step_tokens(*config_shape()), points, phase)
    return {"at_short": full[shapes[0]], "at_config": at_config}


def memory_run(mode, layers, shape, attention=None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.memory", "--run"]
    cmd.append(json.dumps({"mode": mode, "layers": layers, "shape": shape, "attention": attention}))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def static_estimate(mode: str, layers: tuple) -> int:
    """Weights + gradients + optimizer state a run will hold, from the parameter count (built on the meta device):
    runs above the memory limit are skipped, never started."""
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model.dia import dia_1_6b_config

    with torch.device("meta"):
        parameters = sum(p.numel() for p in DiaForConditionalGeneration(dia_1_6b_config(*layers)).parameters())
    dtype, optim, _, lora = MEMORY_MODES[mode]
    size = 4 if dtype == "float32" else 2
    return parameters * size * (1 if lora else 2 if optim == "adafactor" else 4)


def memory_plan(args) -> int:
    cuts = [tuple(int(n) for n in cut.split("+")) for cut in args.layers]
    shapes = [(args.memory_batch, *(int(n) for n in length.split("+"))) for length in args.lengths]
    limit = args.limit_gb * GB
    modes = args.modes or list(MEMORY_MODES)
    results = {}
    print(f"{'mode':<31}{'layers':>7}{'batch x text+frames':>20}{'fwd GB':>8}{'bwd GB':>8}{'step GB':>8}{'s':>6}")
    for mode in modes:
        for layers in [*cuts, *([full_layers()] if mode == args.validate else [])]:
            for shape in shapes if layers in cuts else shapes[:1]:
                if static_estimate(mode, layers) > limit - 2 * GB:  # 2 GB for activations and the process
                    print(f"{mode:<31}{'+'.join(map(str, layers)):>7}  skipped: over --limit-gb {args.limit_gb}")
                    continue
                r = results[mode, layers, shape] = memory_run(mode, layers, shape, args.attention)
                size = f"{shape[0]} x {shape[1]}+{shape[2]}"
                print(
                    f"{mode:<31}{'+'.join(map(str, layers)):>7}{size:>20}{r['forward'] / GB:>8.2f}"
                    f"{r['backward'] / GB:>8.2f}{r['step'] / GB:>8.2f}{r['seconds']:>6.0f}",
                    flush=True,
                )
    print(f"\nDia-1.6B ({full_layers()[0]}+{full_layers()[1]} layers), one training step; GB = 1e9 bytes")
    short, config = shapes[0], config_shape()
    print(
        f"{'mode':<31}{'weights':>8}{'grads':>7}{'optim':>7}{f'peak {short[0]}x{short[1]}+{short[2]}':>15}"
        f"{'measured':>9}{f'peak {config[0]}x{config[1]}+{config[2]}':>17}{'phase':>9}"
    )
    summary = {}
    for mode in modes:
        if not all((mode, layers, shape) in results for layers in cuts for shape in shapes):
            continue
        mine = {key[1:]: r for key, r in results.items() if key[0] == mode}
        full = summary[mode] = extrapolate(mine, cuts, shapes)
        measured = mine.get((full_layers(), short))
        at_short, at_config = full["at_short"], full["at_config"]
        phase = max(PHASES, key=at_config.get)
        direct = f"{measured['peak'] / GB:.2f}" if measured else "-"
        sizes = "".join(
            f"{at_short[key] / GB:>{width}.2f}" for key, width in (("weights", 8), ("grads", 7), ("optimizer", 7))
        )
        print(
            f"{mode:<31}{sizes}{max(at_short[p] for p in PHASES) / GB:>15.2f}{direct:>9}"
            f"{at_config[phase] / GB:>17.2f}{phase:>9}"
        )
    print(
        f"weights, grads, optim: exact bytes of the tensors, linear in layers from the cuts {', '.join(args.layers)}"
    )
    print(f"peak {short[0]}x{short[1]}+{short[2]}: each phase's measured peak (RSS over the process's own before the")
    print(f"  model is built) at the cuts, extrapolated linearly to {full_layers()[0]}+{full_layers()[1]} layers")
    print("measured: the full model run directly at that length (checks the extrapolation)")
    print(f"peak {config[0]}x{config[1]}+{config[2]} (the config's batch): each phase extrapolated linearly in tokens")
    print(f"  from the lengths {', '.join(args.lengths)}; the largest phase shown. CPU figures: transformers' default")
    print("  attention, eager PyTorch")
    if args.json:
        rows = [{**r, "key": [m, list(la), list(sh)]} for (m, la, sh), r in results.items()]
        Path(args.json).write_text(json.dumps({"runs": rows, "extrapolated": summary}, indent=1))
    return 0


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", choices=list(MEMORY_MODES), help="default: all")
    parser.add_argument("--layers", nargs="+", default=["2+3", "4+6"], help="cuts measured, encoder+decoder layers")
    parser.add_argument("--lengths", nargs="+", default=["64+215", "128+430"], help="text tokens+audio frames")
    parser.add_argument("--memory-batch", type=int, default=2, help="the config's per_device_train_batch_size")
    parser.add_argument("--validate", default="LoRA r16 fp32", help="a mode also run on all 12+18 layers ('': none)")
    parser.add_argument("--attention", help="attn_implementation (default: transformers'; XLA's path: eager)")
    parser.add_argument("--limit-gb", type=float, default=15.0, help="runs whose weights+grads+state pass it: skipped")
    parser.add_argument("--json", help="also write every run and the extrapolation here")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one run of memory_plan
    args = parser.parse_args(argv)
    if args.run:
        run = json.loads(args.run)
        print(json.dumps(memory_step(run["mode"], tuple(run["layers"]), tuple(run["shape"]), run["attention"])))
        return 0
    return memory_plan(args)


if __name__ == "__main__":
    sys.exit(main())
