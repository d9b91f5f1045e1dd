"""Encoding recordings into codes: seconds of audio a DAC encodes per second, batched or not, with 1 and 2 processes.

python -m benchmarks.encoding
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from tpu_demo.cli import refuse_unsupported_transformers


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
            launch = [sys.executable, "-m", "accelerate.commands.launch", *cmd, "-m", "benchmarks.encoding"]
            out = subprocess.run([*launch, "--share", tmp], env=env, check=True, capture_output=True, text=True)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            shape = f"{result['processes']} process(es) x {result['threads']} threads"
            print(f"DAC 44.1 kHz, {shape}: {result['rate']:.2f} s of audio per s ({clips} clips of {seconds:.0f} s)")


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.encoding", description=__doc__.splitlines()[0])
    parser.add_argument("--share", help=argparse.SUPPRESS)  # a process of encoding_scaling
    args = parser.parse_args(argv)
    if args.share:
        encoding_share(args.share)
        return 0
    encoding_speed()
    encoding_batched()
    encoding_scaling()
    return 0


if __name__ == "__main__":
    sys.exit(main())
