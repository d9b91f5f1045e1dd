"""The segmenter's newer stages alone, on one core: seconds of work per hour of audio (or per 1,000 sentences of text).

- spoken: a script's written forms read as said (gruut) and pronunciations for words the dictionary lacks (gruut,
  espeak-ng), per 1,000 sentences of text with numbers, money, dates and names; the second pass (cached) too; and
  per 1,000 sentences of dictionary words only (no gruut);
- marks: what read_recording marks at a recording's own rate besides clipping (levels, clicks, digital silences),
  per audio hour at 44.1 kHz, and the level steps found in them;
- channel: choosing the channel that holds the speech of a stereo file, per audio hour at 44.1 kHz;
- diarize: clustering an hour's pieces (about 1,200 of 3 s) by their voices.

    python benchmarks/segment_stages.py [--seconds 600]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def speech_like(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """Syllables of a buzz with pauses between phrases, under a noise floor: the work is what is measured."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    buzz = sum(np.sin(2 * np.pi * 150 * k * t) / k for k in range(1, 10))
    envelope = np.clip(np.sin(2 * np.pi * 2 * t), 0, None) * (np.sin(2 * np.pi * 0.2 * t) > -0.3)
    return (0.1 * buzz * envelope + 1e-3 * rng.standard_normal(len(t))).astype(np.float32)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="benchmarks/segment_stages.py", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="seconds of audio to time the audio stages on")
    args = parser.parse_args(argv)
    import soundfile
    import torch

    torch.set_num_threads(1)
    from tests.planted_speech import WRITTEN
    from tpu_demo.segmenting import spoken as spoken_module
    from tpu_demo.segmenting.diarize import diarize
    from tpu_demo.segmenting.measure import Piece, level_steps
    from tpu_demo.segmenting.read import read_recording, speech_channel

    hour = 3600.0 / args.seconds
    from tests.planted_faults import SENTENCES

    texts = [f"{written} Take {number}." for number in range(84) for written, _ in WRITTEN][:1000]
    plain = [f"{sentence[:-1]} again and again." for sentence in SENTENCES] * 42
    plain = [f"{sentence} {'once ' * (number // len(SENTENCES))}".strip() for number, sentence in enumerate(plain)]
    first = timed(lambda: [spoken_module.pronunciations(text) for text in texts])
    again = timed(lambda: [spoken_module.pronunciations(text) for text in texts])
    words = timed(lambda: [spoken_module.pronunciations(text) for text in plain[:1000]])
    print(
        f"spoken: {first:.1f} s per 1,000 sentences of written forms and names (cached again: {again:.2f} s); "
        f"{words:.1f} s per 1,000 of dictionary words only"
    )

    rate = 44100
    with tempfile.TemporaryDirectory() as folder:
        mono, stereo = Path(folder) / "mono.wav", Path(folder) / "stereo.wav"
        audio = speech_like(args.seconds, rate)
        soundfile.write(mono, audio, rate, subtype="PCM_16")
        noise = (0.05 * np.random.default_rng(1).standard_normal(len(audio))).astype(np.float32)
        soundfile.write(stereo, np.stack([audio, noise], axis=1), rate, subtype="PCM_16")
        del audio, noise
        plain = timed(lambda: read_recording(mono))
        marks = read_recording(mono)[1]
        spans = [(start, start + 3.0) for start in np.arange(0.5, args.seconds - 3.5, 3.5)]
        steps = timed(lambda: level_steps(marks["level"], spans))
        channel = timed(lambda: speech_channel(stereo))
    print(f"read with marks: {plain * hour:.0f} s per audio hour at 44.1 kHz (reading, resampling, levelling "
          f"included); level steps: {steps * hour:.1f} s per audio hour")  # fmt: skip
    print(f"channel: {channel * hour:.0f} s per audio hour of a 44.1 kHz stereo file")

    rng = np.random.default_rng(2)
    axes = np.eye(256)[:2]
    pieces = []
    for number in range(1200):
        vector = axes[number % 2] + 0.1 * rng.standard_normal(256)
        pieces.append(Piece(number * 3.0, number * 3.0 + 2.5, voice=list(vector / np.linalg.norm(vector))))
    print(f"diarize: {timed(lambda: diarize(pieces)):.2f} s for an hour's 1,200 pieces")
    return 0


if __name__ == "__main__":
    sys.exit(main())
