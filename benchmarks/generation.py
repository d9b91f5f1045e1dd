"""Generation: seconds of generation per second of audio, the tiny random Dia on the best local device.

python -m benchmarks.generation [--frames 100]
"""

import argparse
import statistics
import sys
import time

import torch

from tpu_demo.cli import refuse_unsupported_transformers


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


def main(argv=None) -> int:
    refuse_unsupported_transformers()
    parser = argparse.ArgumentParser(prog="benchmarks.generation", description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    generation_speed(parser.parse_args(argv).frames)
    return 0


if __name__ == "__main__":
    sys.exit(main())
