"""Speed and memory of the fine-tune step: Accelerate (the demo's `train_step`) vs a plain PyTorch loop.

    python -m benchmarks.finetune [--steps 150] [--warmup 30]
    python -m benchmarks.finetune --encode     # seconds of audio a DAC encodes per second, 1 and 2 processes
    python -m benchmarks.finetune --generate   # seconds of generation per second of audio (tiny Dia)
    python -m benchmarks.finetune --memory     # memory of one training step of the real Dia-1.6B (random weights)

Each loop runs in its own process (so peak memory is its own) over the same tiny Dia and the same batches.
Prints steady-state step time, samples/s, peak RSS and, on XLA, compilations after warm-up and device-to-host
transfers per step, for the loop as it is and as it was before the XLA fixes.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


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
    """`plain`: PyTorch alone; `accelerate`: the program's `train_step` and model; `accelerate-before` (XLA only):
    the loop as it was before the XLA fixes (sdpa attention with its host-side mask checks, the batch's index tensor
    kept on the device every step)."""
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
            if mode == "accelerate-before":
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


def encoding_speed(seconds: float = 20.0, rounds: int = 3) -> None:
    """Audio seconds encoded per second: the 44.1 kHz DAC architecture (random weights: same cost) and the tiny
    codec of the tests, through `tpu_demo.data.audio.Codec` as preparation uses it."""
    import numpy as np
    from transformers import DacConfig, DacModel

    from tpu_demo.data.audio import Codec
    from tpu_demo.model.dia import tiny_codec_config

    with tempfile.TemporaryDirectory() as tmp:
        for name, config in (("DAC 44.1 kHz", DacConfig(sampling_rate=44100)), ("tiny codec", tiny_codec_config())):
            DacModel(config).save_pretrained(f"{tmp}/{name}")
            codec = Codec(f"{tmp}/{name}")
            samples = np.random.default_rng(0).uniform(-0.5, 0.5, int(seconds * codec.sampling_rate))
            codec.encode([samples[: codec.sampling_rate]])  # warm-up
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                codec.encode([samples])
                times.append(time.perf_counter() - start)
            rate = seconds / statistics.median(times)
            threads = torch.get_num_threads()
            print(f"{name:<14} {rate:8.1f} s of audio per s ({threads} threads, {seconds:.0f} s clips)")


def encoding_batched(seconds: float = 2.0, clips: int = 8) -> None:
    """Equal-length clips encoded one at a time vs as one batch (44.1 kHz DAC architecture): what batching would gain.
    Clips of different lengths would need padding, which changes the codes of a clip's last frames (the encoder's
    receptive field reaches into the padding), so only equal lengths could share a batch."""
    from transformers import DacConfig, DacModel

    torch.manual_seed(0)
    model = DacModel(DacConfig(sampling_rate=44100)).eval()
    audio = torch.rand(clips, 1, int(seconds * 44100)) - 0.5
    with torch.no_grad():
        model.encode(audio[:1, :, :44100])  # warm-up
        start = time.perf_counter()
        single = [model.encode(audio[i : i + 1]).audio_codes[0] for i in range(clips)]
        one_at_a_time = time.perf_counter() - start
        start = time.perf_counter()
        batched = model.encode(audio).audio_codes
        as_batch = time.perf_counter() - start
    same = all(torch.equal(codes, batched[i]) for i, codes in enumerate(single))
    total = clips * seconds
    print(
        f"{clips} x {seconds:.0f} s clips ({torch.get_num_threads()} threads): one at a time "
        f"{total / one_at_a_time:.2f} s of audio per s, one batch {total / as_batch:.2f}; codes identical: {same}"
    )


def encoding_share(folder: str) -> None:
    """Run by `accelerate launch`: this process encodes its share of the manifest in `folder` (as training data
    preparation does); the main process prints the seconds of audio encoded per second by all processes."""
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    state = PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))  # as `accelerate launch` with CPU processes
    rows = read_recordings(f"{folder}/metadata.csv").rows
    codec = Codec(f"{folder}/codec")
    state.wait_for_everyone()
    start = time.perf_counter()
    share = rows[state.process_index :: state.num_processes]
    prepare(share, codec, f"{folder}/cache-{state.num_processes}", 10**9, "truncate", require_items=False)
    state.wait_for_everyone()
    elapsed = time.perf_counter() - start
    if state.is_main_process:
        audio = json.loads(Path(folder, "seconds.json").read_text())
        rate = audio / elapsed
        print(json.dumps({"processes": state.num_processes, "threads": torch.get_num_threads(), "rate": rate}))


def encoding_scaling(clips: int = 8, seconds: float = 5.0) -> None:
    """The 44.1 kHz DAC encoding a manifest's clips with 1 and 2 processes (each its share, as preparation does)."""
    import numpy as np
    import soundfile
    from transformers import DacConfig, DacModel

    from tpu_demo.launch import launch_arguments

    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as tmp:
        DacModel(DacConfig(sampling_rate=44100)).save_pretrained(f"{tmp}/codec")
        rng = np.random.default_rng(0)
        lines = ["audio,text"]
        for number in range(clips):
            soundfile.write(f"{tmp}/{number}.wav", rng.uniform(-0.5, 0.5, int(seconds * 44100)), 44100)
            lines.append(f"{number}.wav,[S1] clip {number}")
        Path(tmp, "metadata.csv").write_text("\n".join(lines) + "\n")
        Path(tmp, "seconds.json").write_text(json.dumps(clips * seconds))
        for processes in (1, 2):
            from tpu_demo.config.arguments import LaunchArguments

            cmd, env = launch_arguments(
                "MULTI_CPU" if processes > 1 else "NO", LaunchArguments(num_processes=processes)
            )
            # the machine's cores split between the processes, as accelerate launch does
            env = os.environ | env | {"OMP_NUM_THREADS": str(max(1, cores // processes))}
            launch = [sys.executable, "-m", "accelerate.commands.launch", *cmd, "-m", "benchmarks.finetune"]
            out = subprocess.run([*launch, "--encode-share", tmp], env=env, check=True, capture_output=True, text=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            shape = f"{result['processes']} process(es) x {result['threads']} threads"
            print(f"DAC 44.1 kHz, {shape}: {result['rate']:.2f} s of audio per s ({clips} clips of {seconds:.0f} s)")


def generation_speed(frames: int = 100, rounds: int = 3) -> None:
    """Seconds of generation per second of audio: the tiny random Dia and codec, CFG on (Dia's sampling settings),
    through `tpu_demo.evaluation.samples.generate_audio` on the best local device, as `python -m tpu_demo.generate`
    runs."""
    from transformers import DacModel, DiaForConditionalGeneration

    from tpu_demo.evaluation.samples import DIA_SAMPLING, generate_audio, generation_device
    from tpu_demo.model.dia import tiny_codec_config, tiny_config
    from tpu_demo.model.processor import dia_processor

    device = generation_device()
    torch.manual_seed(0)
    codec = DacModel(tiny_codec_config())
    processor = dia_processor(codec)
    model = DiaForConditionalGeneration(tiny_config()).to(device)
    settings = {"do_sample": True, **DIA_SAMPLING}
    times, seconds = [], []
    for _ in range(rounds + 1):  # the first round warms up (and compiles on XLA)
        start = time.perf_counter()
        audio = generate_audio(model, processor, ["[S1] Hello there."], frames, settings)
        times.append(time.perf_counter() - start)
        seconds.append(len(audio[0]) / codec.config.sampling_rate)
    ratio = statistics.median(t / max(s, 1e-9) for t, s in zip(times[1:], seconds[1:], strict=True))
    print(f"generation on {device}: {ratio:.2f} s per second of audio ({frames} frames, first round {times[0]:.1f} s)")


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
FULL_LAYERS = (12, 18)  # Dia-1.6B's encoder and decoder layers
CONFIG_SHAPE = (2, 512, 1720)  # tpu_demo/configs/dia-1.6b.yaml: batch, max_text_tokens, max_audio_frames
GB = 1e9


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


def memory_step(mode: str, layers: tuple, shape: tuple, attention: str | None = None) -> dict:
    """One training step (forward with the config's loss, backward, clipping, optimizer step) as `train_step` runs it.
    Bytes over the process's own RSS before the model is built: the peak of each phase, the RSS after the forward
    (what it keeps for the backward), and the exact bytes of weights, gradients and optimizer state."""
    from types import SimpleNamespace

    from accelerate.utils import DistributedType
    from transformers import DiaForConditionalGeneration

    from tpu_demo.config.arguments import LoraArguments
    from tpu_demo.model.dia import dia_1_6b_config
    from tpu_demo.model.lora import wrap
    from tpu_demo.runtime.compat import dtype_keyword
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
    args = SimpleNamespace(optim=optim, learning_rate=1e-5, weight_decay=0.0, adam_beta1=0.9, adam_beta2=0.999,
                           adam_epsilon=1e-8)  # fmt: skip
    optimizer = make_optimizer(args, model, DistributedType.NO)
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
        full[shape] = {key: along(FULL_LAYERS[1], points, key) for key in (*PHASES, "weights", "grads", "optimizer")}
    at_config = {}
    points = [(step_tokens(*shape), full[shape]) for shape in shapes]
    for phase in PHASES:
        at_config[phase] = along(step_tokens(*CONFIG_SHAPE), points, phase)
    return {"at_short": full[shapes[0]], "at_config": at_config}


def memory_run(mode, layers, shape, attention=None) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.finetune", "--memory-run"]
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
        for layers in [*cuts, *([FULL_LAYERS] if mode == args.validate else [])]:
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
    print(f"\nDia-1.6B ({FULL_LAYERS[0]}+{FULL_LAYERS[1]} layers), one training step; GB = 1e9 bytes")
    short, config = shapes[0], CONFIG_SHAPE
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
        measured = mine.get((FULL_LAYERS, short))
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
    print(f"  model is built) at the cuts, extrapolated linearly to {FULL_LAYERS[0]}+{FULL_LAYERS[1]} layers")
    print("measured: the full model run directly at that length (checks the extrapolation)")
    print(f"peak {config[0]}x{config[1]}+{config[2]} (the config's batch): each phase extrapolated linearly in tokens")
    print(f"  from the lengths {', '.join(args.lengths)}; the largest phase shown. CPU figures: transformers' default")
    print("  attention, eager PyTorch")
    if args.json:
        rows = [{**r, "key": [m, list(la), list(sh)]} for (m, la, sh), r in results.items()]
        Path(args.json).write_text(json.dumps({"runs": rows, "extrapolated": summary}, indent=1))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmarks.finetune", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each loop; medians reported")
    parser.add_argument("--mode", choices=["plain", "accelerate", "accelerate-before"], help=argparse.SUPPRESS)
    parser.add_argument("--encode", action="store_true", help="only the audio encoding speed")
    parser.add_argument("--generate", action="store_true", help="only the generation speed (tiny Dia)")
    parser.add_argument("--encode-share", help=argparse.SUPPRESS)  # a process of encoding_scaling
    memory = parser.add_argument_group("--memory: one training step of Dia-1.6B (random weights), each in a process")
    memory.add_argument("--memory", action="store_true", help="only the memory of a training step of Dia-1.6B")
    memory.add_argument("--modes", nargs="+", choices=list(MEMORY_MODES), help="default: all")
    memory.add_argument("--layers", nargs="+", default=["2+3", "4+6"], help="cuts measured, encoder+decoder layers")
    memory.add_argument("--lengths", nargs="+", default=["64+215", "128+430"], help="text tokens+audio frames")
    memory.add_argument("--memory-batch", type=int, default=2, help="the config's per_device_train_batch_size")
    memory.add_argument("--validate", default="LoRA r16 fp32", help="a mode also run on all 12+18 layers ('': none)")
    memory.add_argument("--attention", help="attn_implementation (default: transformers'; XLA's path: eager)")
    memory.add_argument("--limit-gb", type=float, default=15.0, help="runs whose weights+grads+state pass it: skipped")
    memory.add_argument("--json", help="also write every run and the extrapolation here")
    parser.add_argument("--memory-run", help=argparse.SUPPRESS)  # one run of memory_plan
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.memory_run:
        run = json.loads(args.memory_run)
        print(json.dumps(memory_step(run["mode"], tuple(run["layers"]), tuple(run["shape"]), run["attention"])))
        return 0
    if args.memory:
        return memory_plan(args)
    if args.encode_share:
        encoding_share(args.encode_share)
        return 0
    if args.encode:
        encoding_speed()
        encoding_batched()
        encoding_scaling()
        return 0
    if args.generate:
        generation_speed()
        return 0
    if args.mode:
        print(json.dumps(run_loop(args.mode, args.steps, args.warmup, args.batch_size)))
        return 0
    return loop_comparison(args)


def loop_comparison(args) -> int:
    """The Accelerate loop against the plain one (and on XLA the loop as it was before the XLA fixes), each in its
    own process, alternating `rounds` times; medians printed."""
    from accelerate.utils import is_torch_xla_available

    runs = {"plain": [], "accelerate": []}
    if is_torch_xla_available():
        runs["accelerate-before"] = []
    for _ in range(args.rounds):
        for mode in runs:
            cmd = [sys.executable, "-m", "benchmarks.finetune", "--mode", mode, "--steps", str(args.steps)]
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
    if "accelerate-before" in summary:
        print("compiled: XLA graphs compiled after warm-up; to host: device-to-host transfers per step (target: 0, 0)")
    else:
        print(f"Accelerate step time vs plain loop: {overhead:+.1%} (target: within +5% on eager CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
