"""Per-device memory of one SPMD training step of the Dia-1.6B architecture on a TPU slice's chips (random weights),
read from XLA's buffer assignment of the program each device runs: compiled for layer cuts over PJRT CPU virtual
devices, extrapolated to the whole model and checked on a larger cut (docs/MEMORY_1_6B.md).

    python -m benchmarks.xla_memory [--chips 4 8] [--batches 1 2] [--length 512+1720] [--check 6+9] [--json FILE]

Needs torch_xla (`tox -e tpu` installs it). Each compilation is its own process with `CPU_NUM_DEVICES` = chips: it
traces the step as the recipe does under `sharding: fsdp` (bf16 autocast forward, backward, clipping, AdamW) with
full-length samples, and compiles it without running it (running would hold every device's memory in
this host's). The figure is the compiled per-device program's "Total bytes used": its inputs (each device's shard of
the weights and AdamW moments, and its samples), outputs and temporaries. On a TPU the updated weights and moments
reuse their inputs' buffers; runs that executed here (2+3 cut, 2 x 64+215 and 2 x 128+430 on 4 devices) held 4-6%
less than this figure, so it errs high.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.memory import GB, along, config_shape, full_layers, memory_batch, optimizer_settings

MODES = {  # name: activation checkpointing
    "fp32 AdamW, bf16 autocast": False,
    "fp32 AdamW, bf16 autocast, activation checkpointing": True,
}


def step_bytes(dump: Path) -> int:
    """The training step's per-device bytes: the largest program XLA compiled."""
    report = max(dump.glob("*buffer-assignment.txt"), key=lambda f: f.stat().st_size)
    return int(re.search(r"Total bytes used: (\d+)", report.read_text())[1])


def compile_step(mode: str, layers: tuple, shape: tuple) -> None:
    """Traces one step under SPMD `sharding: fsdp` as the recipe does and compiles it (the dump gets its HLO)."""
    import torch
    import torch_xla
    import torch_xla.core.xla_model as xm
    import torch_xla.distributed.spmd as xs
    from accelerate.utils import DistributedType
    from transformers import DiaForConditionalGeneration

    from tpu_demo.config.arguments import LaunchArguments
    from tpu_demo.model.dia import checkpoint_layers_on_xla, dia_1_6b_config, register_static_mask_attention
    from tpu_demo.runtime.spmd import Spmd, batch_axis
    from tpu_demo.training.loss import CodebookLoss
    from tpu_demo.training.optimization import init_optimizer_state, make_optimizer

    torch.manual_seed(0)
    spmd = Spmd(LaunchArguments(sharding="fsdp"))
    config = dia_1_6b_config(*layers)
    model = DiaForConditionalGeneration._from_config(config, attn_implementation=register_static_mask_attention())
    if MODES[mode]:
        checkpoint_layers_on_xla(model)
    model = spmd.shard_model(model.train(), torch_xla.device())
    optimizer = make_optimizer(optimizer_settings("adamw_torch"), model, DistributedType.XLA)
    init_optimizer_state(optimizer)
    spmd.shard_optimizer_state(optimizer)
    batch_size, text, frames = shape
    batch = {k: v.to(torch_xla.device()) for k, v in memory_batch(batch_size * spmd.devices, text, frames).items()}
    for value in batch.values():  # each device gets its samples, as the recipe's loaders upload them
        xs.mark_sharding(value, spmd.mesh, batch_axis(value))
    xm.mark_step()
    with torch.autocast("xla", dtype=torch.bfloat16):
        loss = CodebookLoss(9, [4, 1, 1, 1, 1, 1, 1, 1, 1]).batch_loss(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
    state = [v for s in optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.device.type == "xla"]
    torch_xla._XLAC._xla_warm_up_cache([loss, *model.parameters(), *state], [])  # compiles, runs nothing


def compiled_bytes(mode: str, layers: tuple, shape: tuple, chips: int) -> int:
    with tempfile.TemporaryDirectory() as dump:
        env = {**os.environ, "PJRT_DEVICE": "CPU", "CPU_NUM_DEVICES": str(chips), "TF_CPP_MIN_LOG_LEVEL": "2"}
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump} --xla_dump_hlo_module_re=SyncTensors.*"
        run = json.dumps({"mode": mode, "layers": layers, "shape": shape})
        subprocess.run([sys.executable, "-m", "benchmarks.xla_memory", "--run", run], env=env, check=True)
        return step_bytes(Path(dump))


def plan(args) -> int:
    cuts = [tuple(int(n) for n in cut.split("+")) for cut in args.layers]
    check = tuple(int(n) for n in args.check.split("+")) if args.check else None
    text, frames = (int(n) for n in args.length.split("+")) if args.length else config_shape()[1:]
    print(f"per chip, GB (1e9 bytes), one step at {text} text tokens + {frames} audio frames per sample")
    print(f"{'mode':<53}{'chips':>6}{'batch':>6}" + "".join(f"{'+'.join(map(str, c)):>8}" for c in cuts)
          + f"{'12+18':>8}" + (f"{args.check:>8}{'check':>8}" if check else ""))  # fmt: skip
    rows = []
    for mode in args.modes:
        for chips in args.chips:
            for batch in args.batches:
                shape = (batch, text, frames)
                measured = [(layers[1], {"bytes": compiled_bytes(mode, layers, shape, chips)}) for layers in cuts]
                row = {"mode": mode, "chips": chips, "batch": batch}
                row["full"] = along(full_layers()[1], measured, "bytes")
                row["cuts"] = {"+".join(map(str, c)): m["bytes"] for c, (_, m) in zip(cuts, measured, strict=True)}
                line = f"{mode:<53}{chips:>6}{batch:>6}" + "".join(f"{m['bytes'] / GB:>8.2f}" for _, m in measured)
                line += f"{row['full'] / GB:>8.2f}"
                if check and (mode, chips, batch) == (args.modes[0], args.chips[0], args.batches[-1]):
                    row["check"] = compiled_bytes(mode, check, shape, chips)
                    predicted = along(check[1], measured, "bytes")
                    line += f"{row['check'] / GB:>8.2f}{f'{predicted / GB:.2f}':>8}"
                rows.append(row)
                print(line, flush=True)
    print(f"12+18: linear in layers from the cuts {', '.join(args.layers)}", end="")
    print(f"; check: the {args.check} cut compiled, and what the cuts predict for it" if check else "")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks.xla_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--chips", type=int, nargs="+", default=[4, 8], help="v4-8 and v5p-8: 4 chips; v5e-8: 8")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2], help="per_device_train_batch_size")
    parser.add_argument("--layers", nargs="+", default=["2+3", "4+6"], help="cuts compiled, encoder+decoder layers")
    parser.add_argument("--check", default="6+9", help="a larger cut compiled to check the extrapolation ('': none)")
    parser.add_argument("--length", help="text tokens+audio frames per sample (default: the 1.6B config's)")
    parser.add_argument("--json", help="also write every figure here")
    parser.add_argument("--run", help=argparse.SUPPRESS)  # one compilation, in a process of its own
    args = parser.parse_args(argv)
    if args.run:
        run = json.loads(args.run)
        compile_step(run["mode"], tuple(run["layers"]), tuple(run["shape"]))
        return 0
    return plan(args)


if __name__ == "__main__":
    sys.exit(main())
