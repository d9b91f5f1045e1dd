"""Long recordings of real speech with known truth and planted faults, and a scorer of what
`python -m tpu_demo.segment` reported about them (for tests/finetune/test_planted_faults.py and
benchmarks/segment_faults.py).

The speech is espeak-ng's, one call per sentence, so each sentence's start and end in a recording is known: a
sentence's times are where its sound is (espeak's own silence before and after it trimmed). Signal-to-noise is the
power of the active speech (the mean square of the 20 ms windows inside the sentences no more than `ACTIVE_DB` below
the loudest of them) over the power of the noise (its mean square over the span it is added to)."""

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from functools import lru_cache
from itertools import cycle, islice
from pathlib import Path

import numpy as np

VOICES = {"alice": "en+f3", "bob": "en+m3"}  # the two speakers: clearly different espeak-ng voices
RATES = {"alice": 16000, "bob": 44100}  # alice's recordings are written at 16 kHz, bob's at 44.1 kHz
WINDOW = 0.02  # seconds: the windows signal-to-noise is measured in
ACTIVE_DB = 30.0  # windows of a sentence this far below its loudest are pauses between words, not active speech
NOISY_BELOW_DB = 20.0  # speech under noise below this signal-to-noise is faulty: a segmenter should drop it
INSIDE = 0.2  # seconds: a clip edge further than this inside a sentence cuts the sentence
OVERLAP = 0.05  # seconds: a clip overlapping a sentence by less does not speak for it
SNRS = (34, 24, 14, 10)  # the whole-recording noise levels planted, in dB
SENTENCES = (
    "The harbour lights came on one by one as the fishing boats returned.",
    "Please remember to water the tomatoes before you leave for the weekend.",
    "Nobody expected the old bridge to survive another winter of storms.",
    "She folded the map carefully and tucked it into her coat pocket.",
    "Our train was delayed for almost an hour because of a signal fault.",
    "A small grey cat sat on the windowsill watching the rain.",
    "The committee will announce its decision early next month.",
    "He spent the whole afternoon repairing the kitchen clock.",
    "Fresh bread from the corner bakery sells out before nine.",
    "The museum opens a new exhibition about ancient navigation tomorrow.",
    "Turn left at the second roundabout and follow the signs for the coast.",
    "My grandmother still writes letters with a fountain pen.",
    "The children built a tall tower out of wooden blocks.",
    "Heavy snow closed the mountain pass for three days.",
    "We listened to the radio while we painted the fence.",
    "The recipe calls for two eggs and a cup of warm milk.",
    "Thunder rolled across the valley long after the lightning had passed.",
    "The library keeps its rarest books in a locked room upstairs.",
    "A gentle breeze carried the smell of cut grass through the garden.",
    "They argued about the rules of the game until midnight.",
    "The new bicycle lane runs all the way along the river.",
    "Every spring the swallows return to nest under the barn roof.",
    "The doctor said the cough should clear up within a week.",
    "Bright orange leaves covered the path through the park.",
)


@dataclass
class Sentence:
    start: float  # seconds in the recording, where its sound starts
    end: float
    text: str  # empty for a stretch of no speech (music, noise)
    voice: str
    faulty: bool = False  # a segmenter should drop it
    fault: str | None = None  # what is wrong with it: noise, clipping, other voice, music, noise only, truncated


class NoEspeak(RuntimeError):
    """espeak-ng is not installed: no real speech to plant faults in."""


def espeak() -> str:
    """The espeak-ng program; a NoEspeak error saying how to install it where it is absent."""
    found = shutil.which("espeak-ng")
    if not found:
        raise NoEspeak("planted faults need real speech from espeak-ng: apt install espeak-ng")
    return found


def flite() -> str:
    """Debian's flite (voices made from recordings of real people: kal, awb, rms, slt); NoEspeak where absent."""
    found = shutil.which("flite")
    if not found:
        raise NoEspeak("flite voices need Debian's flite: apt install flite")
    return found


@lru_cache(maxsize=512)
def _spoken(text: str, voice: str, rate: int, words_per_minute: int) -> np.ndarray:
    """`speak`'s samples, made once per sentence, voice and rate."""
    import soundfile
    import soxr

    with tempfile.TemporaryDirectory() as tmp:
        command = [espeak(), "-v", voice, "-s", str(words_per_minute), "-w", f"{tmp}/s.wav", text]
        if voice.startswith("flite:"):  # flite's own pace
            command = [flite(), "-voice", voice.removeprefix("flite:"), "-t", text, "-o", f"{tmp}/s.wav"]
        subprocess.run(command, check=True, capture_output=True)
        audio, source_rate = soundfile.read(f"{tmp}/s.wav", dtype="float32")
    audio = soxr.resample(audio, source_rate, rate) if source_rate != rate else audio
    size = max(1, int(0.005 * rate))  # trimmed to the first and last 5 ms window within 45 dB of the loudest
    levels = 10 * np.log10(np.mean(audio[: len(audio) // size * size].reshape(-1, size) ** 2, axis=1) + 1e-20)
    loud = np.flatnonzero(levels > levels.max() - 45)
    return audio[loud[0] * size : (loud[-1] + 1) * size].astype(np.float32)


def speak(text: str, voice: str, rate: int, words_per_minute: int = 175) -> np.ndarray:
    """One sentence said by an espeak-ng voice (at espeak-ng's usual pace, or another) or a flite one ("flite:kal"),
    at `rate`, float32, trimmed to where its sound is."""
    return _spoken(text, voice, rate, words_per_minute).copy()


def talk(texts, voices, rate: int, seed: int = 0, lead: float = 0.5) -> tuple[np.ndarray, list[Sentence]]:
    """Sentences said one after another (`voices`: one voice, or one per text) with 0.4-1.2 s pauses (seeded) and
    `lead` s of silence at each end: the samples (peak 0.5) and each sentence's times."""
    voices = [voices] * len(texts) if isinstance(voices, str) else list(voices)
    pauses = np.random.default_rng(seed).uniform(0.4, 1.2, len(texts))
    parts, sentences, at = [np.zeros(int(lead * rate), np.float32)], [], int(lead * rate)
    for number, (text, voice) in enumerate(zip(texts, voices, strict=True)):
        speech = speak(text, voice, rate)
        sentences.append(Sentence(at / rate, (at + len(speech)) / rate, text, voice))
        gap = int((pauses[number] if number < len(texts) - 1 else lead) * rate)
        parts += [speech, np.zeros(gap, np.float32)]
        at += len(speech) + gap
    samples = np.concatenate(parts)
    return (samples * (0.5 / np.abs(samples).max())).astype(np.float32), sentences


def span(sentence: Sentence, rate: int) -> slice:
    """The samples of `sentence` in its recording."""
    return slice(round(sentence.start * rate), round(sentence.end * rate))


def active(samples: np.ndarray, sentences, rate: int) -> np.ndarray:
    """Which samples are active speech: in the 20 ms windows inside `sentences` no more than ACTIVE_DB below the
    loudest of them."""
    size, windows = int(WINDOW * rate), []
    for sentence in sentences:
        first = span(sentence, rate).start
        windows += [(at, at + size) for at in range(first, round(sentence.end * rate) - size + 1, size)]
    powers = np.array([np.mean(samples[a:b].astype(np.float64) ** 2) for a, b in windows])
    mask = np.zeros(len(samples), bool)
    for (a, b), power in zip(windows, powers, strict=True):
        mask[a:b] = power >= powers.max() * 10 ** (-ACTIVE_DB / 10)
    return mask


def active_power(samples: np.ndarray, sentences, rate: int) -> float:
    """Mean square of the active speech of `sentences` (`active`)."""
    return float(np.mean(samples[active(samples, sentences, rate)].astype(np.float64) ** 2))


def noise(kind: str, length: int, rate: int, seed: int = 0) -> np.ndarray:
    """Gaussian noise of unit RMS: `white`, or `pink` (power falling 3 dB an octave from 20 Hz up, flat below)."""
    samples = np.random.default_rng(seed).standard_normal(length)
    if kind == "pink":
        spectrum = np.fft.rfft(samples)
        frequencies = np.maximum(np.fft.rfftfreq(length, 1 / rate), 20.0)  # no drift of the level below 20 Hz
        samples = np.fft.irfft(spectrum / np.sqrt(frequencies), length)
    elif kind != "white":
        raise ValueError(f"noise: {kind!r} is neither white nor pink")
    return (samples / np.sqrt(np.mean(samples**2))).astype(np.float32)


def add_noise(samples, sentences, rate: int, snr_db: float, kind="white", seed=0, start=0.0) -> np.ndarray:
    """`samples` with noise from `start` s to the end, `snr_db` below the active speech of the sentences there."""
    first = round(start * rate)
    speech = active_power(samples, [s for s in sentences if s.start >= start], rate)
    noisy = samples.copy()
    noisy[first:] += noise(kind, len(samples) - first, rate, seed) * np.float32(np.sqrt(speech / 10 ** (snr_db / 10)))
    return noisy


def clip_sentence(samples: np.ndarray, sentence: Sentence, rate: int, gain: float = 8.0) -> np.ndarray:
    """`samples` with one sentence amplified `gain` times and hard-clipped to +-1.0."""
    clipped = samples.copy()
    clipped[span(sentence, rate)] = np.clip(clipped[span(sentence, rate)] * gain, -1.0, 1.0)
    return clipped


def reverberate_sentence(samples: np.ndarray, sentence: Sentence, rate: int, rt60: float = 1.2) -> np.ndarray:
    """`samples` with one sentence heard in a large hall: convolved with decaying noise (`rt60` s to fall 60 dB), at
    its peak level; the pauses stay silent, so its SNR is as clean as its neighbours'."""
    from scipy.signal import fftconvolve

    times = np.arange(int(rt60 * rate)) / rate
    response = np.random.default_rng(5).normal(0, 1, len(times)) * np.exp(-6.9 * times / rt60)
    response[0] = 1.0
    said = samples[span(sentence, rate)]
    wet = fftconvolve(said, response)[: len(said)]
    out = samples.copy()
    out[span(sentence, rate)] = wet / np.abs(wet).max() * np.abs(said).max()
    return out


def music(seconds: float, rate: int) -> np.ndarray:
    """Synthetic music, no speech: a chord a second (three notes of five harmonics) under a melody of eighth notes."""
    chords = [(220.0, 277.2, 329.6), (196.0, 246.9, 293.7), (174.6, 220.0, 261.6), (196.0, 246.9, 311.1)]
    melody = [659.3, 587.3, 523.3, 587.3, 659.3, 784.0, 659.3, 523.3]

    def note(frequency, length, level):
        t = np.arange(int(length * rate)) / rate
        tone = sum(np.sin(2 * np.pi * frequency * k * t) / k**1.5 for k in range(1, 6))
        return level * tone * np.exp(-3 * t / length) * np.minimum(1, t / 0.01)  # 10 ms attack, decaying

    out = np.zeros(int(seconds * rate))
    for number in range(int(np.ceil(seconds))):
        chord = sum(note(f, 1.0, 0.08) for f in chords[number % len(chords)])
        at = number * rate
        out[at : at + len(chord)] += chord[: len(out) - at]
    for number in range(int(seconds / 0.25)):
        tone, at = note(melody[number % len(melody)], 0.25, 0.12), int(number * 0.25 * rate)
        out[at : at + len(tone)] += tone[: len(out) - at]
    return (out * (0.5 / np.abs(out).max())).astype(np.float32)


def write_corrupt(path, size: int = 20000, seed: int = 0) -> Path:
    """Random bytes under an audio file's name."""
    Path(path).write_bytes(np.random.default_rng(seed).bytes(size))
    return Path(path)


def wav_frames(path) -> tuple[int, int]:
    """A 16-bit mono WAV's frames as its header claims them and as the file holds them (whole frames)."""
    data = Path(path).read_bytes()
    at = 12
    while at + 8 <= len(data):
        chunk, size = data[at : at + 4], int.from_bytes(data[at + 4 : at + 8], "little")
        if chunk == b"data":
            return size // 2, (len(data) - at - 8) // 2
        at += 8 + size + size % 2
    raise ValueError(f"{path}: no data chunk")


def write_truncated(path, samples: np.ndarray, rate: int, cut: float) -> float:
    """`samples` as a 16-bit WAV whose data chunk ends mid-frame at `cut` s, its header still claiming all of them;
    the seconds the file holds."""
    import soundfile

    soundfile.write(str(path), samples, rate, subtype="PCM_16")
    _, held = wav_frames(path)
    data = Path(path).read_bytes()
    frames = round(cut * rate)
    Path(path).write_bytes(data[: len(data) - 2 * held + 2 * frames + 1])  # one byte of the next frame
    return frames / rate


def write_recordings(folder, sentences: int = 8, seed: int = 0) -> dict:
    """A recordings folder of two speakers' subfolders holding every planted fault (`sentences`: a clean recording's
    count; the others have about half); the truth: recording name -> file, fault, rate, seconds and sentences."""
    import soundfile

    folder, truth, texts = Path(folder), {}, cycle(SENTENCES)
    half, few = max(2, sentences // 2 * 2), max(3, sentences // 2 + 1)

    def save(name, samples, rate, found, fault, suffix="wav", seconds=None):
        path = folder / f"{name}.{suffix}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if samples is not None:
            soundfile.write(str(path), samples, rate, subtype="PCM_16")
            seconds = len(samples) / rate
        truth[name] = {"file": str(path.relative_to(folder)), "fault": fault, "rate": rate, "seconds": seconds,
                       "sentences": [asdict(s) for s in found]}  # fmt: skip
        return path

    for number, speaker in enumerate(VOICES):  # the control: clean speech, alice's with its transcript, bob's FLAC
        rate, voice = RATES[speaker], VOICES[speaker]
        said = list(islice(texts, sentences))
        samples, found = talk(said, voice, rate, seed + number)
        label = "clean FLAC 44.1 kHz" if speaker == "bob" else "clean WAV + transcript"
        path = save(f"{speaker}/clean", samples, rate, found, label, "flac" if speaker == "bob" else "wav")
        if speaker == "alice":
            path.with_suffix(".txt").write_text("\n".join(said) + "\n", encoding="utf-8")
    for number, (speaker, kind) in enumerate((("alice", "white"), ("bob", "pink"))):  # noise over it all
        rate, voice = RATES[speaker], VOICES[speaker]
        for level in SNRS:
            samples, found = talk(list(islice(texts, half // 2)), voice, rate, seed + 10 + level)
            samples = add_noise(samples, found, rate, level, kind, seed + number)
            for sentence in found:
                sentence.faulty, sentence.fault = level < NOISY_BELOW_DB, "noise"
            save(f"{speaker}/{kind}-noise-{level}db", samples, rate, found, f"{kind} noise {level} dB")
    rate, voice = RATES["alice"], VOICES["alice"]
    samples, found = talk(list(islice(texts, half)), voice, rate, seed + 20)  # the second half noisy
    middle = (found[len(found) // 2 - 1].end + found[len(found) // 2].start) / 2
    samples = add_noise(samples, found, rate, 10, "white", seed + 21, start=middle)
    for sentence in found[len(found) // 2 :]:
        sentence.faulty, sentence.fault = True, "noise"
    save("alice/half-noisy", samples, rate, found, "second half noisy 10 dB")
    samples, found = talk(list(islice(texts, few)), voice, rate, seed + 30)  # one sentence clipped
    samples = clip_sentence(samples, found[1], rate)
    found[1].faulty, found[1].fault = True, "clipping"
    save("alice/clipped", samples, rate, found, "clipping in one sentence")
    voices = [VOICES["bob"] if n == 1 else voice for n in range(few)]  # bob's voice in alice's folder
    samples, found = talk(list(islice(texts, few)), voices, rate, seed + 40)
    found[1].faulty, found[1].fault = True, "other voice"
    save("alice/other-voice", samples, rate, found, "other voice")
    tune = np.concatenate([np.zeros(rate // 2, np.float32), music(6.0, rate), np.zeros(rate // 2, np.float32)])
    save("alice/music", tune, rate, [Sentence(0.5, 6.5, "", "", True, "music")], "music only")
    write_corrupt(folder / "alice/corrupt.wav", seed=seed)
    save("alice/corrupt", None, rate, [], "corrupt file", seconds=0.0)
    rate = RATES["bob"]
    hiss = (0.03 * noise("pink", 7 * rate, rate, seed + 50)).astype(np.float32)
    save("bob/noise-only", hiss, rate, [Sentence(0.0, 7.0, "", "", True, "noise only")], "noise only")
    samples, found = talk(list(islice(texts, few)), VOICES["bob"], rate, seed + 60)
    cut_at = (found[len(found) // 2].start + found[len(found) // 2].end) / 2
    held = write_truncated(folder / "bob/truncated.wav", samples, rate, cut_at)
    found = [s for s in found if s.start < held]  # what follows the cut is not in the file
    found[-1].end, found[-1].faulty, found[-1].fault = held, True, "truncated"
    save("bob/truncated", None, rate, found, "truncated WAV", seconds=held)
    return truth


def write_levelling_faults(folder, sentences: int = 4, seed: int = 0) -> dict:
    """Recordings whose faults a tool downstream fixes, so a segmenter should keep their speech (levelled): alice's
    clean speech at -40 dBFS peak, and with a DC offset of 0.2; and a 0.3 s file of one word, which is too short to
    train on. The truth, as `write_recordings` gives it."""
    import soundfile

    folder, truth, rate, voice = Path(folder), {}, RATES["alice"], VOICES["alice"]
    texts = list(islice(cycle(SENTENCES[::-1]), 2 * sentences))

    def save(name, samples, found, fault):
        path = folder / f"{name}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(path), samples, rate, subtype="PCM_16")
        truth[name] = {"file": str(path.relative_to(folder)), "fault": fault, "rate": rate,
                       "seconds": len(samples) / rate, "sentences": [asdict(s) for s in found]}  # fmt: skip

    samples, found = talk(texts[:sentences], voice, rate, seed + 70)
    save("alice/quiet", samples * np.float32(0.01 / 0.5), found, "quiet: -40 dBFS peak")
    samples, found = talk(texts[sentences:], voice, rate, seed + 80)
    save("alice/dc-offset", samples + np.float32(0.2), found, "DC offset 0.2")
    word = speak("Yes.", voice, rate)[: int(0.3 * rate)]
    short = np.zeros(int(0.3 * rate), np.float32)
    short[: len(word)] = word * (0.5 / np.abs(word).max())
    save("alice/short-file", short, [Sentence(0.0, len(word) / rate, "Yes.", voice, True, "too short")], "0.3 s file")
    return truth


def burst(rate: int, seconds: float = 0.12, seed: int = 0) -> np.ndarray:
    """A cough or a click: noise in a sharp attack and a fast decay, peak 0.4."""
    t = np.arange(int(seconds * rate)) / rate
    shape = np.minimum(1, t / 0.005) * np.exp(-t / (seconds / 4))
    samples = np.random.default_rng(seed).standard_normal(len(t)) * shape
    return (0.4 * samples / np.abs(samples).max()).astype(np.float32)


def write_pause_faults(folder, sentences: int = 4, seed: int = 0) -> dict:
    """Recordings whose pauses and band are at fault: alice's sentences under 40 dB noise with a cough or click in
    each pause (the bursts faulty, the sentences good), alice's sentences with a 6 s pause in the middle, and bob's
    sentences band-limited to a telephone's 300-3400 Hz at 44.1 kHz (faulty: a full-band codec would learn them
    muffled). The truth, as `write_recordings` gives it."""
    import soundfile
    from scipy.signal import butter, sosfiltfilt

    folder, truth = Path(folder), {}
    texts = list(islice(cycle(SENTENCES[5:]), 3 * sentences))

    def save(name, samples, rate, found, fault):
        path = folder / f"{name}.wav"
        path.parent.mkdir(parents=True, exist_ok=True)
        soundfile.write(str(path), samples, rate, subtype="PCM_16")
        truth[name] = {"file": str(path.relative_to(folder)), "fault": fault, "rate": rate,
                       "seconds": len(samples) / rate, "sentences": [asdict(s) for s in found]}  # fmt: skip

    rate, voice = RATES["alice"], VOICES["alice"]
    samples, found = talk(texts[:sentences], voice, rate, seed + 90, lead=1.0)
    pauses = [(0.0, found[0].start)] + [(a.end, b.start) for a, b in zip(found, found[1:], strict=False)]
    bursts = []
    for number, (start, end) in enumerate(pauses):
        cough = burst(rate, seed=seed + number)
        at = round((start + end) / 2 * rate) - len(cough) // 2
        samples[at : at + len(cough)] += cough
        bursts.append(Sentence(at / rate, (at + len(cough)) / rate, "", "", True, "burst"))
    samples = add_noise(samples, found, rate, 40, "white", seed + 91)
    save("alice/bursts", samples, rate, sorted(found + bursts, key=lambda s: s.start), "coughs/clicks in pauses")
    first, found = talk(texts[sentences : sentences + 2], voice, rate, seed + 92)
    second, later = talk(texts[sentences + 2 : sentences + 4], voice, rate, seed + 93)
    gap = np.zeros(int(5.0 * rate), np.float32)  # with the 0.5 s leads: a 6 s pause
    offset = (len(first) + len(gap)) / rate
    for sentence in later:
        sentence.start, sentence.end = sentence.start + offset, sentence.end + offset
    save("alice/long-pause", np.concatenate([first, gap, second]), rate, found + later, "a 6 s pause")
    rate, voice = RATES["bob"], VOICES["bob"]
    samples, found = talk(texts[2 * sentences : 3 * sentences], voice, rate, seed + 94)
    band = sosfiltfilt(butter(8, [300, 3400], btype="bandpass", fs=rate, output="sos"), samples)
    for sentence in found:
        sentence.faulty, sentence.fault = True, "band-limited"
    save("bob/telephone", (band * (0.5 / np.abs(band).max())).astype(np.float32), rate, found, "telephone band")
    return truth


def write_overlap_faults(
    folder, sentences: int = 8, seed: int = 0, under_db: float = 3.0, name: str = "overlap"
) -> dict:
    """alice's recording with bob talking over a third of each of its sentences 2, 4 and 6, `under_db` under her
    (faulty: two voices at once); her other sentences are clean. The truth, as `write_recordings` gives it."""
    import soundfile

    folder, rate = Path(folder), RATES["alice"]
    texts = list(islice(cycle(SENTENCES[5:]), sentences))
    samples, found = talk(texts, VOICES["alice"], rate, seed + 110)
    for number in (2, 4, 6):
        said = span(found[number], rate)
        other = speak(SENTENCES[(number + 11) % len(SENTENCES)], VOICES["bob"], rate)
        length = min(len(other), said.stop - said.start)
        start = said.start + (said.stop - said.start - length) // 3
        samples[start : start + length] += other[:length] * np.float32(
            0.5 / np.abs(other).max() * 10 ** (-under_db / 20)
        )
        found[number] = Sentence(found[number].start, found[number].end, found[number].text, VOICES["alice"], True,
                                 "overlapping voice")  # fmt: skip
    path = folder / f"alice/{name}.wav"
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), samples * np.float32(0.5 / np.abs(samples).max()), rate, subtype="PCM_16")
    fault = f"a second voice over 3 of 8{f' at {-under_db:+.0f} dB' if under_db != 3 else ''}"
    return {f"alice/{name}": {"file": f"alice/{name}.wav", "fault": fault, "rate": rate,
                              "seconds": len(samples) / rate, "sentences": [asdict(s) for s in found]}}  # fmt: skip


def write_script_faults(folder, sentences: int = 6, seed: int = 0) -> dict:
    """A recording read from a script that is not quite what was said, as a practitioner's often is: the script
    (NAME.txt) lacks its second sentence and has one more at the end that was never said. All its speech is good;
    a segmenter must give each kept clip the words said in it. The truth, as `write_recordings` gives it."""
    import soundfile

    folder, truth, rate, voice = Path(folder), {}, RATES["alice"], VOICES["alice"]
    said = list(islice(cycle(SENTENCES[11:]), sentences))
    samples, found = talk(said, voice, rate, seed + 100)
    path = folder / "alice/script-mismatch.wav"
    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), samples, rate, subtype="PCM_16")
    script = [said[0], *said[2:], SENTENCES[0]]
    path.with_suffix(".txt").write_text("\n".join(script) + "\n", encoding="utf-8")
    truth["alice/script-mismatch"] = {"file": "alice/script-mismatch.wav", "fault": "script: one missing, one extra",
                                      "rate": rate, "seconds": len(samples) / rate,
                                      "sentences": [asdict(s) for s in found]}  # fmt: skip
    return truth


def skipped_recordings(report: dict) -> dict:
    """The report's recordings it could not read, name -> reason (`skipped`: a mapping, or a list of names or of
    {recording, reason}); none where the report has no such key."""
    skipped = report.get("skipped") or {}
    if isinstance(skipped, dict):
        return {str(name): str(reason) for name, reason in skipped.items()}
    found = {}
    for entry in skipped:
        if isinstance(entry, dict):
            found[str(entry.get("recording"))] = str(entry.get("reason") or entry.get("dropped") or "skipped")
        else:
            found[str(entry)] = "skipped"
    return found


def _skip_reason(name: str, file: str, skipped: dict) -> str | None:
    """Why the report skipped a recording, named by its name, its file or a path ending in it; None if it did not."""
    for key, reason in skipped.items():
        if key in (name, file) or str(Path(key).with_suffix("")).endswith(name):
            return reason
    return None


def _union(intervals) -> list[tuple[float, float]]:
    """(start, end) intervals merged where they overlap, in order."""
    merged = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _covered(start: float, end: float, intervals) -> float:
    """Seconds of start..end inside the (disjoint) intervals."""
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in intervals)


def _words(text: str) -> list[str]:
    return "".join(c if c.isalnum() or c == "'" else " " for c in re.sub(r"\[[^\]]*\]", " ", text).lower()).split()


def _right_text(clip: dict, said) -> bool:
    """Whether a clip's text is the words of the sentences said in it (those of which it holds more than half)."""
    inside = [s for s in said if _covered(s.start, s.end, [(clip["start"], clip["end"])]) > (s.end - s.start) / 2]
    return _words(clip["text"]) == [word for s in inside for word in _words(s.text)]


def _longest_silence(clip: dict, sentences) -> float:
    """The longest stretch of `clip` with no sentence (nor burst) in it, in seconds."""
    edges = [clip["start"]]
    for sentence in sorted(sentences, key=lambda s: s.start):
        if sentence.end > clip["start"] and sentence.start < clip["end"]:
            edges += [max(sentence.start, clip["start"]), min(sentence.end, clip["end"])]
    edges.append(clip["end"])
    return max(b - a for a, b in zip(edges[::2], edges[1::2], strict=True))


def score(truth: dict, report: dict) -> list[dict]:
    """Per planted recording: its fault, the reasons the report gives for the clips over its faulty sentences (over
    all its sentences where none is faulty), the seconds of good speech kept and lost (covered by no kept clip), the
    seconds of faulty speech kept, the cuts inside sentences (clip edges more than INSIDE s into one), the longest
    silence inside a kept clip, and the kept clips whose text is not the words said in them."""
    skipped, rows = skipped_recordings(report), []
    for name, planted in truth.items():
        sentences = [Sentence(**s) for s in planted["sentences"]]
        clips = [c for c in report.get("clips", []) if c.get("recording") == name]
        kept = _union((c["start"], c["end"]) for c in clips if not c.get("dropped"))
        targets = [s for s in sentences if s.faulty] or sentences
        reasons = Counter(
            clip.get("dropped") or "kept"
            for clip in clips
            if not targets or any(_covered(s.start, s.end, [(clip["start"], clip["end"])]) > OVERLAP for s in targets)
        )
        skip = _skip_reason(name, planted["file"], skipped)
        if skip is not None:
            reasons[f"skipped: {skip}"] += 1
        edges = {round(edge, 3) for clip in clips for edge in (clip["start"], clip["end"])}
        good, said = [s for s in sentences if not s.faulty], [s for s in sentences if s.text]
        rows.append({
            "recording": name,
            "fault": planted["fault"],
            "reasons": dict(reasons) if reasons else {"not in report": 1},
            "good_seconds": sum(s.end - s.start for s in good),
            "good_kept": sum(_covered(s.start, s.end, kept) for s in good),
            "good_lost": sum(s.end - s.start - _covered(s.start, s.end, kept) for s in good),
            "faulty_kept": sum(_covered(s.start, s.end, kept) for s in sentences if s.faulty),
            "cuts_inside": sum(s.start + INSIDE < edge < s.end - INSIDE for edge in edges for s in said),
            "longest_silence_kept": max((_longest_silence(c, sentences) for c in clips if not c.get("dropped")),
                                        default=0.0),
            "wrong_text": sum(not _right_text(c, said) for c in clips if not c.get("dropped") and "text" in c),
        })  # fmt: skip
    return rows


def reasons_text(reasons: dict) -> str:
    """`{"noisy": 3, "kept": 1}` as "noisy x3, kept x1", most frequent first."""
    ordered = sorted(reasons.items(), key=lambda item: -item[1])
    return ", ".join(reason if count == 1 else f"{reason} x{count}" for reason, count in ordered)
