"""The measure stage: each piece's true SNR (against the pauses around it), clipping, bandwidth, and of those the
cheap measures keep, DNSMOS P.835 scores and a GE2E voice embedding (the models ship inside their wheels).
"""

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from tpu_demo.segmenting.read import RATE, WINDOW, levelled, window_power

# a dropout: digital silence inside a piece with speech on both sides (10 ms within this many dB of the piece's loud
# windows), cutting into the waveform by at least DROPOUT_CUT of its peak (read.digital_silences)
DROPOUT_DB, DROPOUT_CUT = 25.0, 0.02
VOICE_WINDOW, VOICE_HOP = 1.6, 0.77  # seconds: VoiceEncoder's windows, and between their starts (1.3 a second)
STEP_DB, STEP_SPEECH = 9.0, 2.0  # a level step: this many dB between the levels of this much speech each side
STEP_PERCENTILE = 80  # the level of a stretch of speech: its syllables' peaks, which what is said moves less than
STEP_PAUSE, STEP_SNAP = 0.3, 0.5  # seconds: a pause between loud windows (a word's stops are shorter); how near one
EDGE_MARGIN = 0.05  # seconds: a fault this close to a piece's edge is in the pause (the detector cuts tight)
NOISE_REACH = 3.0  # seconds: a piece's noise is that of the pauses this close to it, if 0.3 s or more
FRAMING = {  # the constants of DNSMOS P.835's framing: 9.01 s cut into 900 frames of 20 ms, 10 ms apart
    "input_1:01_cropping_end": ([2**63 - 1, 144000], [1, -160]),  # (speechmos's, any length's)
    "shape_tensor": ([-1, 900, 160], [1, -1, 160]),
    "shape_tensor1": ([-1, 900, 160], [1, -1, 160]),
}
BANDWIDTH_FLOOR_DB = 55.0  # a piece's bandwidth: the highest frequency its spectrum reaches within this of its peak
# a piece's band is measured over at least this much speech, its nearest neighbours' added to a shorter one: alone, a
# short reply without a hiss in it ("No.", "I know.") reached 3.8-5.9 kHz in full-band recordings, as a telephone's
# band does. Over 120 pieces of flite awb (16 kHz), pooled so: 7.5-7.9 kHz; through a telephone's band 3.8-4.0, at
# 8 kHz 4.4-4.5, under a 4th-order 5 kHz low-pass 5.1-5.6 (alone, at 50 dB: 4.4-7.8 kHz, 29 % under 6)
BAND_SECONDS = 10.0
# music in the pauses (tones): 64 ms frames at least TONE_GAP s from speech (a room's reverberation of the voice is
# shorter); a frame is tonal when most of its 100-4000 Hz energy is in peaks TONE_PEAK_DB over the spectrum's running
# median, a tone sustained when the same peaks are there TONE_HOLD s later; a note changes when the strongest peak of
# a sustained frame is on another semitone than the pauses' most common one (a fan or a hum keeps one)
TONE_FRAME, TONE_HOP, TONE_GAP, TONE_PEAK_DB, TONE_HOLD = 1024, 256, 0.3, 12.0, 0.064
MUSIC_REACH = 10.0  # seconds: a piece's music is that of the pauses this close to it (a bed spans minutes)
MUSIC_NOTES = 0.25  # share of sustained frames off the most common note: music (a fan's or a hum's tone holds one)


@dataclass
class Piece:
    """Speech between two pauses, with what was measured of it."""

    start: float
    end: float
    snr_db: float | None = None  # None: no pause near it to measure the noise in
    music: float | None = None  # share of its pauses' frames with sustained tones of changing notes (None: unmeasured)
    clipped: float = 0.0  # share of its samples held flat at full scale
    bandwidth_hz: float | None = None  # speech_models.bandwidth, in the 16 kHz copy
    sound_before: bool = False  # a sound in the pause before it (a cough, a click): no clip joins across it
    alignment: float | None = None  # the forced alignment's confidence in its text (align_text), 0-1
    dnsmos: dict = field(default_factory=dict)
    voice: list = field(default_factory=list)  # speaker embedding
    voice_windows: list = field(default_factory=list)  # those of its 1.6 s windows (VoiceEncoder)
    fault: str | None = None  # a fault inside it: dropout, level step, clicks (inner_fault)
    fault_detail: str = ""
    fault_at: float | None = None  # where in the recording its fault is (seconds)
    fault_voices: list = field(default_factory=list)  # a level step's: the voice before it and after, each levelled
    turn: str | None = None  # its voice in a dialogue without a transcript: [S1] or [S2] (diarize)
    transcript: str | None = None
    asr_confidence: float | None = None  # the recogniser's in its transcript (Transcriber.heard); None: it gives none
    text: str = ""
    dropped: str | None = None
    detail: str = ""


def combined(first: Piece, second: Piece) -> Piece:
    """Two pieces and the pause between them as one: each measure of the whole from theirs (the worst SNR, clipping
    and band, their DNSMOS scores and voice weighted by their lengths, both voices' windows)."""
    lengths = np.array([first.end - first.start, second.end - second.start])

    def mean(values):
        return [float(v) for v in np.average(np.array(values, dtype=float), axis=0, weights=lengths)]

    voice = mean([first.voice, second.voice]) if first.voice and second.voice else []
    both = [key for key in first.dnsmos if key in second.dnsmos]
    dnsmos = {key: mean([[first.dnsmos[key]], [second.dnsmos[key]]])[0] for key in both}
    worst = [value for value in (first.snr_db, second.snr_db) if value is not None]
    bands = [value for value in (first.bandwidth_hz, second.bandwidth_hz) if value is not None]
    return dataclasses.replace(
        first,
        end=second.end,
        snr_db=min(worst) if worst else None,
        music=max(first.music or 0.0, second.music or 0.0) if (first.music, second.music) != (None, None) else None,
        clipped=max(first.clipped, second.clipped),
        bandwidth_hz=min(bands) if bands else None,
        dnsmos=dnsmos,
        voice=(np.array(voice) / np.linalg.norm(voice)).tolist() if voice else [],  # an embedding: unit length
        voice_windows=first.voice_windows + second.voice_windows,
    )


def measure(audio16k: np.ndarray, marks: dict, rate: int, spans, judge=None, encoder=None) -> list[Piece]:
    """Each span of speech as a Piece with its SNR, clipping, bandwidth, a fault inside it (`inner_fault`: a
    dropout, a level step, a click; `marks`: read_recording's), and, given the models (`judge`, `encoder`), DNSMOS
    scores and voice (else `quality` gives them to the pieces the cheaper measures keep)."""
    clipped, steps = marks["clipped"], level_steps(marks["level"], spans)
    power = window_power(audio16k)
    pause = np.ones(len(power), dtype=bool)
    for start, end in spans:  # a pause starts 0.1 s away from speech: its edges carry speech
        pause[max(0, int((start - 0.1) / WINDOW)) : int((end + 0.1) / WINDOW) + 1] = False
    centres = np.arange(len(power)) * WINDOW
    frames = tone_frames(audio16k, spans)
    pieces, previous_end = [], None
    for number, (start, end) in enumerate(spans):
        piece = Piece(round(start, 3), round(end, 3))
        if previous_end is not None:  # a window of the pause 20 dB over its median: a sound no clip may hold
            between = power[pause & (centres > previous_end) & (centres < start)]
            piece.sound_before = bool(len(between) and between.max() > max(100 * np.median(between), 1e-7))
        previous_end = end
        noise = None
        for reach in (NOISE_REACH, 15.0, np.inf):  # the nearest pauses that are long enough to measure
            sides = [
                pause & (centres >= start - reach) & (centres < start),
                pause & (centres > end) & (centres <= end + reach),
            ]
            # the median window: a click or a cough in the pause is not the noise under the speech
            levels = [float(np.median(power[side])) for side in sides if side.sum() * WINDOW >= 0.3]
            if levels:  # the quieter side: noise that starts or stops in a pause is not this piece's
                noise = min(levels)
                break
        piece.music = music_around(frames, start, end)
        speech = power[int(start / WINDOW) : max(int(end / WINDOW), int(start / WINDOW) + 1)]
        if noise is not None:
            level = max(noise, 1e-12)
            piece.snr_db = round(10 * np.log10(max(float(np.mean(speech)) - level, 1e-12) / level), 2)
        first, last = int(start * 100), max(int(end * 100), int(start * 100) + 1)  # 10 ms windows
        piece.clipped = round(float(clipped[first:last].sum()) / ((last - first) * rate / 100), 6)
        samples = levelled(audio16k[int(start * RATE) : int(end * RATE)])  # each piece at one level
        piece.bandwidth_hz = bandwidth(samples, *band_neighbours(audio16k, spans, number))
        piece.fault, piece.fault_detail = inner_fault(piece, marks, steps)
        piece.fault_at = next((at for at, _ in steps if piece.start < at < piece.end), None)
        if judge is not None and encoder is not None:
            piece.dnsmos, (piece.voice, piece.voice_windows) = judge(samples), encoder(samples)
        pieces.append(piece)
    return pieces


def tone_frames(audio16k: np.ndarray, spans) -> dict:
    """The pauses' 64 ms frames (TONE_GAP s or more from speech): each one's time (`at`), whether it holds any sound
    (`heard`) and a sustained tone (`sustained`); and whether the recording's notes change (`notes_change`: a share
    MUSIC_NOTES of the sustained frames' strongest peaks off their most common semitone)."""
    from scipy.ndimage import median_filter

    away = np.ones(len(audio16k), dtype=bool)
    for start, end in spans:
        away[max(0, int((start - TONE_GAP) * RATE)) : int((end + TONE_GAP) * RATE)] = False
    edges = np.flatnonzero(np.diff(np.concatenate([[0], away.astype(np.int8), [0]])))
    starts = [k for run, stop in zip(edges[::2], edges[1::2], strict=True)
              for k in range(run, stop - TONE_FRAME + 1, TONE_HOP)]  # fmt: skip
    found = {"at": np.array([k / RATE for k in starts]), "sustained": np.zeros(len(starts), bool)}
    found["heard"], found["notes_change"] = np.zeros(len(starts), bool), False
    if not starts:
        return found
    low, high = int(100 * TONE_FRAME / RATE), int(4000 * TONE_FRAME / RATE)
    blocks = np.stack([audio16k[k : k + TONE_FRAME] for k in starts]).astype(np.float64) * np.hanning(TONE_FRAME)
    spectrum = (np.abs(np.fft.rfft(blocks, axis=1)) ** 2)[:, low:high]
    db = 10 * np.log10(spectrum + 1e-20)
    peaks = (db - median_filter(db, size=(1, 31), mode="nearest") > TONE_PEAK_DB) & (db >= np.roll(db, 1, 1))
    peaks &= db >= np.roll(db, -1, 1)
    near = peaks | np.roll(peaks, 1, 1) | np.roll(peaks, -1, 1)
    heard = spectrum.sum(axis=1) > 1e-9 * TONE_FRAME  # digital silence holds no tone
    tonal = heard & ((spectrum * near).sum(axis=1) > 0.5 * spectrum.sum(axis=1))
    lag = round(TONE_HOLD * RATE / TONE_HOP)
    for index in range(len(starts) - lag):
        if starts[index + lag] - starts[index] == lag * TONE_HOP and tonal[index] and tonal[index + lag]:
            later = peaks[index + lag]
            held = (later & near[index]).sum() / max(peaks[index].sum(), later.sum(), 1)
            found["sustained"][index] = held >= 0.5
    strongest = (np.argmax(np.where(peaks, db, -np.inf), axis=1) + low) * RATE / TONE_FRAME
    semitones = np.round(12 * np.log2(np.maximum(strongest, 1.0) / 440)).astype(int)[found["sustained"]]
    common = np.unique(semitones, return_counts=True)[1].max() if len(semitones) else 0
    found["heard"], found["notes_change"] = heard, bool(len(semitones)) and 1 - common / len(semitones) >= MUSIC_NOTES
    return found


def music_around(frames: dict, start: float, end: float) -> float | None:
    """Of the pauses' frames within MUSIC_REACH s of a piece (or the recording's, where those hold under 0.25 s),
    the share that hold sustained tones, where the recording's notes change (`tone_frames`; else a fan, a hum: 0.0);
    None where its pauses are digital silence or too short to hear."""
    for reach in (MUSIC_REACH, np.inf):
        near = (frames["at"] >= start - reach) & (frames["at"] <= end + reach) & frames["heard"]
        if near.sum() * TONE_HOP / RATE >= 0.25:
            break
    else:
        return None
    return round(float(frames["sustained"][near].mean()), 3) if frames["notes_change"] else 0.0


def level_steps(level: np.ndarray, spans) -> list[tuple[float, float]]:
    """Where the recording's level steps inside its speech, and by how many dB: the STEP_PERCENTILE level of the
    loud 10 ms windows (within 30 dB of the speech's 95th percentile) of the STEP_SPEECH s of speech after a point
    against that of those before it, STEP_DB or more apart (a gain knob turned mid-word, takes joined at other
    levels); the steepest point of each such stretch. The median moved with what is said: 9-11 dB inside flite
    awb's sentences of money and dates, 20 false steps in its 26-minute reading (none at the 80th percentile)."""
    inside = np.zeros(len(level), dtype=bool)
    for start, end in spans:
        inside[int(start * 100) : int(end * 100)] = True
    speech = np.flatnonzero(inside)
    if not len(speech):
        return []
    loud = speech[level[speech] > np.percentile(level[speech], 95) - 30]
    values, reach, found, best = level[loud], int(STEP_SPEECH * 100), [], None
    for k in range(reach, len(loud) - reach + 1, 2):
        after, before = values[k : k + reach], values[k - reach : k]
        step = float(np.percentile(after, STEP_PERCENTILE) - np.percentile(before, STEP_PERCENTILE))
        if abs(step) >= STEP_DB:
            best = max(best or (0.0, 0, 0.0), (abs(step), k, step))
        elif best is not None:
            found.append(((loud[best[1] - 1] + loud[best[1]] + 1) / 200, best[2]))
            best = None
    if best is not None:
        found.append(((loud[best[1] - 1] + loud[best[1]] + 1) / 200, best[2]))
    # a step within STEP_SNAP s of a pause is at it (the steepest point of 2 s levels lands a little off): a change
    # of speaker, or of take, which clips' levelling fixes
    pauses = [((loud[k - 1] + 1) / 100, loud[k] / 100) for k in np.flatnonzero(np.diff(loud) > STEP_PAUSE * 100) + 1]
    return [(at, step) for at, step in found
            if not any(start - STEP_SNAP <= at <= end + STEP_SNAP for start, end in pauses)]  # fmt: skip


def inner_fault(piece: Piece, marks: dict, steps: list[tuple[float, float]]) -> tuple[str | None, str]:
    """A fault inside the piece, and its figures: a dropout (digital silence with speech on both sides of it, cut
    into the waveform, in a recording with a noise floor: where its pauses are digital silence, a TTS's or a noise
    gate's, its own gaps inside speech are the same), a level step, or clicks."""
    level = marks["level"][int(piece.start * 100) : max(int(piece.end * 100), int(piece.start * 100) + 1)]
    loud = float(np.percentile(level, 95)) if len(level) else 0.0
    for at, seconds, before, after, cut in marks["dropouts"] if marks.get("noise_floor", True) else []:
        inside = piece.start + EDGE_MARGIN < at < piece.end - EDGE_MARGIN
        if inside and min(before, after) >= loud - DROPOUT_DB and cut >= DROPOUT_CUT:
            return "dropout", f"{seconds * 1000:.0f} ms of digital silence inside speech at {at - piece.start:.2f} s"
    for at, step in steps:
        if piece.start + EDGE_MARGIN < at < piece.end - EDGE_MARGIN:
            return "level step", f"its level steps by {step:+.1f} dB at {at - piece.start:.2f} s"
    windows = np.flatnonzero(marks["clicks"][int(piece.start * 100) : int(piece.end * 100)])
    if len(windows):
        return "clicks", f"{len(windows)} clicks, the first at {windows[0] / 100:.2f} s"
    return None, ""


def quality(audio16k: np.ndarray, piece: Piece, judge, encoder) -> dict:
    """A piece's DNSMOS scores and voice, measured levelled: the costly measures, taken of the pieces the cheap ones
    (SNR, clipping, bandwidth, length) keep."""
    samples = levelled(audio16k[int(piece.start * RATE) : int(piece.end * RATE)])
    voice, windows = encoder(samples)
    return {"dnsmos": judge(samples), "voice": voice, "voice_windows": windows}


def step_voices(audio16k: np.ndarray, piece: Piece, encoder) -> dict:
    """The voice of the piece before its level step and after it, each levelled on its own (the encoder hears one
    voice at two levels as two), with the piece's own voice."""
    sides = [(piece.start, piece.fault_at), (piece.fault_at, piece.end)]
    voices = [encoder(levelled(audio16k[int(start * RATE) : int(end * RATE)]))[0] for start, end in sides]
    return voice_of(audio16k, piece, encoder) | {"fault_voices": voices}


def voice_of(audio16k: np.ndarray, piece: Piece, encoder) -> dict:
    """A piece's voice alone, measured levelled (of a piece dropped before: only who speaks in it is wanted)."""
    voice, windows = encoder(levelled(audio16k[int(piece.start * RATE) : int(piece.end * RATE)]))
    return {"voice": voice, "voice_windows": windows}


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


def band_neighbours(audio16k: np.ndarray, spans, number: int) -> list[np.ndarray]:
    """The speech nearest the piece `spans[number]` shorter than BAND_SECONDS, each span levelled, until they hold
    BAND_SECONDS with it (none for a longer piece): its band is its recording's there, which a few words may not
    show."""
    start, end = spans[number]
    others = [span for other, span in enumerate(spans) if other != number]
    found, seconds = [], end - start
    for other_start, other_end in sorted(others, key=lambda span: max(span[0] - end, start - span[1])):
        if seconds >= BAND_SECONDS:
            break
        found.append(levelled(audio16k[int(other_start * RATE) : int(other_end * RATE)]))
        seconds += other_end - other_start
    return found


def bandwidth(*pieces: np.ndarray) -> float | None:
    """The highest frequency in Hz (at most 8000, the 16 kHz copy's) where the pieces' average spectrum (Welch, 32 ms
    windows, each piece's weighted by its length, smoothed over 5 bins) is within BANDWIDTH_FLOOR_DB of its peak:
    about 7800 for full-band speech, 4000 for a telephone's 300-3400 Hz band however it is stored. None for less
    than one window."""
    from scipy.signal import welch

    spectra = [welch(piece.astype(np.float64), RATE, nperseg=512) + (len(piece),)
               for piece in pieces if len(piece) >= 512 and np.any(piece)]  # fmt: skip
    if not spectra:
        return None
    frequencies = spectra[0][0]
    power = sum(found * length for _, found, length in spectra) / sum(length for *_, length in spectra)
    power = np.convolve(power, np.ones(5) / 5, mode="same")
    reached = np.flatnonzero(power >= power.max() * 10 ** (-BANDWIDTH_FLOOR_DB / 10))
    return round(float(frequencies[reached[-1]]), 1)
