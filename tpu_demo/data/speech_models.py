"""The pretrained speech models the segmenter judges recordings with, all loaded offline from their pip packages
(the `speech` extra): Silero VAD (where speech is), DNSMOS P.835 (how clean it sounds, without a reference), a GE2E
speaker encoder (whose voice it is), ITU-R BS.1770 loudness, and pocketsphinx (an English recogniser).

Each model works on 16 kHz mono float32, the rate all of them were trained at."""

import functools
from collections import Counter

import numpy as np

RATE = 16000
DITHER = 10.0  # 16-bit steps (-70 dBFS)
PACKAGES = {"silero_vad": "silero-vad", "speechmos": "speechmos", "resemblyzer": "Resemblyzer"}


def missing_package(error: ImportError) -> str:
    """The pip name of the package an ImportError of this module means."""
    name = (error.name or "").split(".")[0]
    if name == "pkg_resources":  # webrtcvad, which Resemblyzer imports, needs setuptools' pkg_resources
        return "setuptools<81"
    return PACKAGES.get(name, name)


def pcm16(audio16k: np.ndarray) -> np.ndarray:
    """16-bit samples for pocketsphinx with a dither 70 dB under full scale, below any room's noise: digital silence
    (a noise gate's) has no spectrum, and pocketsphinx then aligns a sentence without its last words, or not at all
    (Kaldi dithers its features for the same reason; one step of dither was not enough here)."""
    dither = DITHER * np.random.default_rng(0).standard_normal(len(audio16k))  # seeded: the same alignment each run
    return np.clip(np.clip(audio16k, -1, 1) * 32767 + dither, -32768, 32767).astype(np.int16)


def loud_frames(audio16k: np.ndarray, frame: int, quiet_db: float) -> np.ndarray:
    """Whether each `frame`-sample frame is as loud as speech: within `quiet_db` of the piece's loud frames."""
    frames = audio16k[: len(audio16k) // frame * frame].reshape(-1, frame)
    levels = 10 * np.log10((frames.astype(np.float64) ** 2).mean(axis=1) + 1e-12)
    return levels > (np.percentile(levels, 95) - quiet_db if len(levels) else 0.0)


def known(decoder, word: str) -> bool:
    """Whether `word` is in the decoder's dictionary, or made so: a compound of two words it holds ("windowsill")."""
    if decoder.lookup_word(word) is not None:
        return True
    for cut in range(2, len(word) - 1):
        head, tail = decoder.lookup_word(word[:cut]), decoder.lookup_word(word[cut:])
        if head and tail:
            decoder.add_word(word, f"{head} {tail}", True)
            return True
    return False


def phones(decoder, word: str) -> int:
    """How many phones the decoder's dictionary gives `word` (a variant, "word(2)", too); 1 if it has none."""
    return len((decoder.lookup_word(word) or "x").split())


def longest_run(flags: np.ndarray, gap: int) -> int:
    """The most set flags in one run of them, a run going on over fewer than `gap` unset ones (a word's stops)."""
    longest = count = 0
    last = None
    for index in np.flatnonzero(flags):
        count = count + 1 if last is not None and index - last <= gap else 1
        longest, last = max(longest, count), index
    return longest


def to_model_rate(audio: np.ndarray, rate: int) -> np.ndarray:
    import soxr

    audio = np.ascontiguousarray(audio, dtype=np.float32)
    return audio if rate == RATE else soxr.resample(audio, rate, RATE).astype(np.float32)


class SpeechDetector:
    """Silero VAD: the spans of a recording where someone speaks, cut at pauses of at least `min_pause_seconds`;
    speech longer than `max_seconds` is split at its longest inner pause. Its sequence model gives the streaming
    model's probabilities for each 32 ms frame, bit for bit, in one ONNX call per 16 s instead of one per frame."""

    def __init__(self, threshold: float, min_pause_seconds: float, max_seconds: float):
        from silero_vad import load_silero_vad

        self.model = load_silero_vad(sequence=True)
        self.threshold, self.min_pause, self.max_seconds = threshold, min_pause_seconds, max_seconds

    def __call__(self, audio16k: np.ndarray) -> list[tuple[float, float]]:
        from silero_vad import get_speech_timestamps_sequence

        spans = get_speech_timestamps_sequence(
            np.ascontiguousarray(audio16k, dtype=np.float32),
            self.model,
            threshold=self.threshold,
            sampling_rate=RATE,
            min_silence_duration_ms=int(self.min_pause * 1000),
            max_speech_duration_s=self.max_seconds,
            speech_pad_ms=0,  # the segmenter keeps its own margin, bounded by the pause
            return_seconds=False,
        )
        return [(span["start"] / RATE, span["end"] / RATE) for span in spans]


FRAMING = {  # the constants of DNSMOS P.835's framing: 9.01 s cut into 900 frames of 20 ms, 10 ms apart
    "input_1:01_cropping_end": ([2**63 - 1, 144000], [1, -160]),  # (speechmos's, any length's)
    "shape_tensor": ([-1, 900, 160], [1, -1, 160]),
    "shape_tensor1": ([-1, 900, 160], [1, -1, 160]),
}


def any_length(path) -> bytes:
    """speechmos's DNSMOS P.835 graph made to take one piece of any length: only its framing is fixed; every later
    layer convolves or pools over time, to a global max."""
    import onnx
    from onnx import numpy_helper

    from tpu_demo.errors import FineTuneError

    model = onnx.load(str(path))
    found = {init.name: init for init in model.graph.initializer if init.name in FRAMING}
    if [numpy_helper.to_array(found[name]).tolist() if name in found else None for name in FRAMING] != [
        fixed for fixed, _ in FRAMING.values()
    ]:
        raise FineTuneError(f"{path}: not the DNSMOS graph of speechmos 0.0.1 (pip install 'speechmos==0.0.1.1')")
    for name, (_, length) in FRAMING.items():
        found[name].CopyFrom(numpy_helper.from_array(np.array(length, dtype=np.int64), name))
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[0].dim_value, dims[1].dim_param = 1, "samples"
    return model.SerializeToString()


class QualityJudge:
    """DNSMOS P.835: the SIG (speech), BAK (background) and OVRL (overall) opinion scores, 1 to 5, of speechmos's
    model run once on a whole piece, at its own length (its whole 10 ms hops; a piece under a second repeated to one,
    as speechmos repeats one under 9 s). speechmos's own `run` repeats a piece to 9.01 s, the model's fixed input,
    slides windows 1 s apart over it and runs the P.808 model besides: 3 to 7 times the work of a 9 s piece, more
    for a shorter one. The scores differ by about 0.1 (0.6 at most for a clean sentence; the repeats' seams are
    sounds of their own); which side of the thresholds a planted fault falls is the same."""

    HOP = 160  # samples: 10 ms
    MIN_SECONDS = 1.0
    POLYNOMIALS = {  # speechmos's mapping of the raw outputs to P.835 scores (not personalised)
        "sig": (-0.08397278, 1.22083953, 0.0052439),
        "bak": (-0.13166888, 1.60915514, -0.39604546),
        "ovrl": (-0.06766283, 1.11546468, 0.04602535),
    }

    def __init__(self):
        from pathlib import Path

        import onnxruntime
        import speechmos
        import torch

        model = any_length(Path(speechmos.__file__).parent / "dnsmos_models" / "sig_bak_ovr.onnx")
        options = onnxruntime.SessionOptions()  # the process's share of the cores (its own default: all of them)
        options.intra_op_num_threads, options.inter_op_num_threads = torch.get_num_threads(), 1
        self.session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])

    def __call__(self, audio16k: np.ndarray) -> dict[str, float]:
        audio = np.clip(np.asarray(audio16k, dtype=np.float32), -1, 1)
        if not len(audio):
            return {}
        audio = np.resize(audio, max(len(audio), int(self.MIN_SECONDS * RATE)))
        raw = self.session.run(None, {"input_1": audio[None, : len(audio) // self.HOP * self.HOP]})[0][0]
        return {
            name: round(float(np.polyval(polynomial, value)), 3)
            for (name, polynomial), value in zip(self.POLYNOMIALS.items(), raw, strict=True)
        }


class VoiceEncoder:
    """Resemblyzer's GE2E encoder: a unit vector per piece of speech, the mean of those of its 1.6 s windows (which
    overlap; one for a shorter piece); the dot product of two is their similarity. Both are given: a second voice over
    part of a piece shows in its windows more than in their mean."""

    def __init__(self):
        import contextlib
        import io
        import warnings

        with warnings.catch_warnings():  # webrtcvad, which it imports, warns of pkg_resources on every run
            warnings.filterwarnings("ignore", "pkg_resources is deprecated", UserWarning)
            from resemblyzer import VoiceEncoder as Encoder

        with contextlib.redirect_stdout(io.StringIO()):  # it prints a line on loading
            self.encoder = Encoder("cpu")

    def __call__(self, audio16k: np.ndarray) -> tuple[list[float], list[list[float]]]:
        voice, windows, _ = self.encoder.embed_utterance(audio16k, return_partials=True)
        return [round(float(x), 5) for x in voice], [[round(float(x), 4) for x in window] for window in windows]


LEVEL_LUFS = -23.0  # what a piece is levelled to before the measures that depend on level


def without_dc(audio: np.ndarray, rate: int) -> np.ndarray:
    """`audio` without its DC offset and what lies below 20 Hz (a zero-phase 2nd-order Butterworth high-pass): an
    offset is no fault of the speech, and in the pauses it would read as noise."""
    from scipy.signal import butter, sosfiltfilt

    if len(audio) < 64:
        return (audio - audio.mean(initial=0.0)).astype(np.float32)
    sos = butter(2, 20.0, btype="highpass", fs=rate, output="sos")
    return sosfiltfilt(sos, audio.astype(np.float64)).astype(np.float32)


def levelled(audio: np.ndarray, rate: int = RATE, target_lufs: float = LEVEL_LUFS) -> np.ndarray:
    """`audio` scaled to `target_lufs` (BS.1770; RMS for less than the 0.4 s it needs), its peak at most 0.99:
    the speaker encoder's similarity and DNSMOS fall with level (the same sentence 0.93 at -10 dB, 0.45 at -34 dB),
    and level is for a tool downstream to fix, not a fault."""
    import pyloudnorm

    audio = np.asarray(audio, dtype=np.float32)
    if not len(audio) or not np.any(audio):
        return audio
    if len(audio) >= int(0.4 * rate) + 1:
        loudness = pyloudnorm.Meter(rate).integrated_loudness(audio.astype(np.float64))
    else:
        loudness = float("-inf")
    if not np.isfinite(loudness):  # too short or gated away: its RMS, as a sine's loudness would read
        loudness = 10 * np.log10(float(np.mean(audio.astype(np.float64) ** 2)) + 1e-20) - 0.691 + 3.01
    gain = 10 ** ((target_lufs - loudness) / 20)
    peak = float(np.abs(audio).max()) * gain
    gain = gain * 0.99 / peak if peak > 0.99 else gain
    return (audio * np.float32(gain)).astype(np.float32)


BANDWIDTH_FLOOR_DB = 50.0  # a piece's bandwidth: the highest frequency its spectrum reaches within this of its peak


def bandwidth(audio16k: np.ndarray) -> float | None:
    """The highest frequency in Hz (at most 8000, the 16 kHz copy's) where the piece's average spectrum (Welch, 32 ms
    windows, smoothed over 5 bins) is within BANDWIDTH_FLOOR_DB of its peak: about 7800 for full-band speech, 4000
    for a telephone's 300-3400 Hz band however it is stored. None for less than one window."""
    from scipy.signal import welch

    if len(audio16k) < 512 or not np.any(audio16k):
        return None
    frequencies, power = welch(audio16k.astype(np.float64), RATE, nperseg=512)
    power = np.convolve(power, np.ones(5) / 5, mode="same")
    reached = np.flatnonzero(power >= power.max() * 10 ** (-BANDWIDTH_FLOOR_DB / 10))
    return round(float(frequencies[reached[-1]]), 1)


def loudness_normalised(audio: np.ndarray, rate: int, target_lufs: float) -> np.ndarray:
    """`audio` at `target_lufs` integrated loudness (BS.1770), its peak kept at or below -1 dBFS."""
    import pyloudnorm

    loudness = pyloudnorm.Meter(rate).integrated_loudness(audio.astype(np.float64))
    gain = 10 ** ((target_lufs - loudness) / 20) if np.isfinite(loudness) else 1.0
    peak = float(np.abs(audio).max(initial=0.0)) * gain
    if peak > 10 ** (-1 / 20):
        gain *= 10 ** (-1 / 20) / peak
    return (audio * gain).astype(np.float32)


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


class Aligner:
    """pocketsphinx's forced alignment of a piece's text to its audio: where each word is said, and whether the
    text is all that is said. Uncertain (a `problem`): the text cannot be aligned at all (a word not said, another
    sentence), a word aligned nowhere or squeezed to the fewest frames its phones allow (said elsewhere), or speech
    the text lacks: a word stretched over more speech than its phones take, or sound as loud as speech (QUIET_DB)
    for more than `max_silence` s where the aligner puts silence inside a piece, or EDGE_SILENCE at its ends, which
    the speech detector cut tight. Pauses and a piece's quiet margins are no problem. English, like its recogniser.
    A 3-state phone takes at least 3 frames: speech faster than FAST_PHONES phones a second (espeak-ng's 320 words a
    minute says 21-24) is aligned at 5 ms frames, where at 10 ms pocketsphinx aligned 13 of 36 such sentences."""

    FRAME = 0.01  # seconds: pocketsphinx's frame
    FAST_PHONES = 16.0  # phones a second of a piece (its text's, over its length): faster is aligned at FRAME / 2
    EDGE_SILENCE = 0.1  # seconds of speech-loud sound the aligner calls silence at a piece's ends: a word ("the")
    QUIET_DB = 30.0  # a frame this far under the piece's loud frames (its 95th percentile) is a pause
    STRETCH = 0.25  # seconds of speech a phone: twice the longest of 1,032 words aligned right (espeak-ng's voices)

    def __init__(self, max_silence: float):
        from pocketsphinx import Decoder

        self.decoder, self.max_silence, self.decoders = Decoder, max_silence, {}

    def decoder_at(self, frame: float):
        """One decoder a frame length, made once (alignment needs no language model), its features reset for each
        piece: a used decoder's adapt (CMN), so an alignment would depend on the pieces aligned before. The search's
        own path, not a lattice's best (`bestpath`), which ended 3 of 120 clean sentences before their last word."""
        if frame not in self.decoders:
            self.decoders[frame] = self.decoder(loglevel="FATAL", lm=None, frate=round(1 / frame), bestpath=False)
        self.decoders[frame].reinit_feat()
        return self.decoders[frame]

    def __call__(self, audio: np.ndarray, rate: int, text: str) -> dict:
        words = text.split()
        if not words:
            return {"confidence": 0.0, "problem": "no words to align"}
        decoder = self.decoder_at(self.FRAME)
        unknown = [word for word in dict.fromkeys(words) if not known(decoder, word)]
        if unknown:
            return {"confidence": 0.0, "problem": f"not in the aligner's dictionary: {' '.join(unknown[:3])}"}
        audio16k = to_model_rate(audio, rate)
        seconds, frame = max(len(audio16k) / RATE, self.FRAME), self.FRAME
        if sum(phones(decoder, word) for word in words) / seconds > self.FAST_PHONES:
            frame, decoder = self.FRAME / 2, self.decoder_at(self.FRAME / 2)
            for word in dict.fromkeys(words):
                known(decoder, word)
        try:
            decoder.set_align_text(" ".join(words))
            decoder.start_utt()
            decoder.process_raw(pcm16(audio16k).tobytes(), full_utt=True)
            decoder.end_utt()
        except Exception as error:
            self.decoders.pop(frame)  # one left mid-utterance would refuse every later piece
            if not isinstance(error, RuntimeError):
                raise
            return {"confidence": 0.0, "problem": f"not aligned ({error})"}
        segments = list(decoder.seg() or [])
        if decoder.hyp() is None or not segments:
            return {"confidence": 0.0, "problem": "the text does not align with the audio"}
        loud = loud_frames(audio16k, round(frame * RATE), self.QUIET_DB)
        aligned = [segment.word.split("(")[0] for segment in segments if not segment.word.startswith(("<", "["))]
        missing = list((Counter(words) - Counter(aligned)).elements())
        unexplained = 0.1 * len(missing)
        problems = [f"{' '.join(repr(word) for word in missing[:3])} aligned nowhere"] if missing else []
        for number, segment in enumerate(segments):
            length = (segment.end_frame - segment.start_frame + 1) * frame
            edge = number in (0, len(segments) - 1)  # a piece of speech starts and ends in speech: a word there
            if segment.word == "<sil>":
                sounding = longest_run(loud[segment.start_frame : segment.end_frame + 1], round(0.1 / frame)) * frame
                if sounding > (self.EDGE_SILENCE if edge else self.max_silence):
                    unexplained += sounding
                    at = segment.start_frame * frame
                    problems.append(f"speech the text lacks ({sounding:.2f} s in a silence at {at:.2f} s)")
            elif not segment.word.startswith(("<", "[")):
                count, word = phones(decoder, segment.word), segment.word.split("(")[0]
                sounding = loud[segment.start_frame : segment.end_frame + 1].sum() * frame
                if length <= 3 * count * frame:  # a 3-state HMM's fewest frames: squeezed in
                    unexplained += 0.1
                    problems.append(f"'{word}' squeezed to {length:.2f} s")
                elif sounding > self.STRETCH * count + 0.25:  # a word stretched over others the text lacks
                    unexplained += sounding - self.STRETCH * count
                    problems.append(f"speech the text lacks ('{word}' stretched over {sounding:.2f} s)")
        confidence = round(max(0.0, 1.0 - float(unexplained) / seconds), 3)
        return {"confidence": confidence, "problem": "; ".join(problems) or None}
