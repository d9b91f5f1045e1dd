"""Speed and memory of the fine-tune step: Accelerate (the demo's `train_step`) vs a plain PyTorch loop.

    python -m tpu_demo.benchmark [--steps 150] [--warmup 30]
    python -m tpu_demo.benchmark --encode     # seconds of audio a DAC encodes per second, 1 and 2 processes
    python -m tpu_demo.benchmark --generate   # seconds of generation per second of audio (tiny Dia)

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
    from tpu_demo.data import CodesDataset, DiaCollator, write_synthetic
    from tpu_demo.model import DELAY_PATTERN

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

    from tpu_demo.loss import MODEL_INPUTS, CodebookLoss
    from tpu_demo.model import register_static_mask_attention, tiny_config
    from tpu_demo.optimization import init_optimizer_state
    from tpu_demo.recipe import train_step
    from tpu_demo.xla_counters import counts

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
    codec of the tests, through `tpu_demo.audio.Codec` as preparation uses it."""
    import numpy as np
    from transformers import DacConfig, DacModel

    from tpu_demo.audio import Codec
    from tpu_demo.model import tiny_codec_config

    with tempfile.TemporaryDirectory() as tmp:
        for name, config in (("DAC 44.1 kHz", DacConfig(sampling_rate=44100)), ("tiny codec", tiny_codec_config())):
            DacModel(config).save_pretrained(f"{tmp}/{name}")
            codec = Codec(f"{tmp}/{name}")
            samples = np.random.default_rng(0).uniform(-0.5, 0.5, int(seconds * codec.sampling_rate))
            codec.encode(samples[: codec.sampling_rate])  # warm-up
            times = []
            for _ in range(rounds):
                start = time.perf_counter()
                codec.encode(samples)
                times.append(time.perf_counter() - start)
            rate = seconds / statistics.median(times)
            threads = torch.get_num_threads()
            print(f"{name:<14} {rate:8.1f} s of audio per s ({threads} threads, {seconds:.0f} s clips)")


def encoding_share(folder: str) -> None:
    """Run by `accelerate launch`: this process encodes its share of the manifest in `folder` (as training data
    preparation does); the main process prints the seconds of audio encoded per second by all processes."""
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    from tpu_demo.audio import Codec, prepare
    from tpu_demo.layouts import read_recordings

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
            from tpu_demo.arguments import LaunchArguments

            cmd, env = launch_arguments(
                "MULTI_CPU" if processes > 1 else "NO", LaunchArguments(num_processes=processes)
            )
            # the machine's cores split between the processes, as accelerate launch does
            env = os.environ | env | {"OMP_NUM_THREADS": str(max(1, cores // processes))}
            launch = [sys.executable, "-m", "accelerate.commands.launch", *cmd, "-m", "tpu_demo.benchmark"]
            out = subprocess.run([*launch, "--encode-share", tmp], env=env, check=True, capture_output=True, text=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            shape = f"{result['processes']} process(es) x {result['threads']} threads"
            print(f"DAC 44.1 kHz, {shape}: {result['rate']:.2f} s of audio per s ({clips} clips of {seconds:.0f} s)")


def generation_speed(frames: int = 100, rounds: int = 3) -> None:
    """Seconds of generation per second of audio: the tiny random Dia and codec, CFG on (Dia's sampling settings),
    through `tpu_demo.samples.generate_audio` on the best local device, as `python -m tpu_demo.generate` runs."""
    from transformers import DacModel, DiaForConditionalGeneration

    from tpu_demo.model import tiny_codec_config, tiny_config
    from tpu_demo.prepare import dia_processor
    from tpu_demo.samples import DIA_SAMPLING, generate_audio, generation_device

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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="tpu_demo.benchmark", description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each loop; medians reported")
    parser.add_argument("--mode", choices=["plain", "accelerate", "accelerate-before"], help=argparse.SUPPRESS)
    parser.add_argument("--encode", action="store_true", help="only the audio encoding speed")
    parser.add_argument("--generate", action="store_true", help="only the generation speed (tiny Dia)")
    parser.add_argument("--encode-share", help=argparse.SUPPRESS)  # a process of encoding_scaling
    args = parser.parse_args(argv)
    if args.encode_share:
        encoding_share(args.encode_share)
        return 0
    if args.encode:
        encoding_speed()
        encoding_scaling()
        return 0
    if args.generate:
        generation_speed()
        return 0
    if args.mode:
        print(json.dumps(run_loop(args.mode, args.steps, args.warmup, args.batch_size)))
        return 0
    from accelerate.utils import is_torch_xla_available

    runs = {"plain": [], "accelerate": []}
    if is_torch_xla_available():
        runs["accelerate-before"] = []
    for _ in range(args.rounds):
        for mode in runs:
            cmd = [sys.executable, "-m", "tpu_demo.benchmark", "--mode", mode, "--steps", str(args.steps)]
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
