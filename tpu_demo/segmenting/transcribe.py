"""The transcribe stage's offline recogniser: pocketsphinx's English model, inside its wheel (a Whisper goes
through tpu_demo.evaluation.intelligibility).
"""

import functools

import numpy as np

from tpu_demo.segmenting.read import to_model_rate

DITHER = 10.0  # 16-bit steps (-70 dBFS)


def pcm16(audio16k: np.ndarray) -> np.ndarray:
    """16-bit samples for pocketsphinx with a dither 70 dB under full scale, below any room's noise: digital silence
    (a noise gate's) has no spectrum, and pocketsphinx then aligns a sentence without its last words, or not at all
    (Kaldi dithers its features for the same reason; one step of dither was not enough here)."""
    dither = DITHER * np.random.default_rng(0).standard_normal(len(audio16k))  # seeded: the same alignment each run
    return np.clip(np.clip(audio16k, -1, 1) * 32767 + dither, -32768, 32767).astype(np.int16)


class Pocketsphinx:
    """The English recogniser inside the pocketsphinx wheel (`segment_asr_model: pocketsphinx`): weak, but real
    and offline; enough to align a recording's own text to its clips."""

    def __init__(self, language: str | None = None):
        from tpu_demo.errors import FineTuneError

        if language and not language.lower().startswith("en"):
            raise FineTuneError(f"segment_asr_model pocketsphinx: English only, not segment_language {language}")
        from pocketsphinx import Decoder

        self.new_decoder = functools.partial(Decoder, loglevel="FATAL")
        self.decoder = self.new_decoder()  # 0.4 s, once: its language model is most of that

    def heard(self, audio: np.ndarray, rate: int) -> tuple[str, None]:
        """The transcript of one piece, and no confidence: pocketsphinx's scores are not probabilities."""
        return self(audio, rate), None

    def __call__(self, audio: np.ndarray, rate: int) -> str:
        samples = pcm16(to_model_rate(audio, rate))
        decoder = self.decoder
        decoder.reinit_feat()  # a used decoder's features adapt (CMN): each transcript as a new decoder's
        try:
            decoder.start_utt()
            decoder.process_raw(samples.tobytes(), full_utt=True)
            decoder.end_utt()
        except Exception:
            self.decoder = self.new_decoder()  # one left mid-utterance would refuse every later piece
            raise
        hypothesis = decoder.hyp()
        return hypothesis.hypstr if hypothesis else ""
