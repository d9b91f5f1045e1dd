"""Recordings as Dia users have them, with known truth (for tests/finetune/test_written_forms.py, test_dialogues.py,
test_faults_in_pieces.py, test_channels.py and benchmarks/segment_cases.py): a script with numbers, money, dates and
names read as people read them; dialogues of two voices, with and without their transcript; faults inside a
sentence (digital dropouts, a gain step, clicks); a stereo file with the speech in one channel. Scored by
`planted_faults.score`, and dialogues' speaker tags by `tag_errors`.

The speech is espeak-ng's (tests/planted_faults.py): what a sentence says is given to espeak-ng as a reader says
it ("forty-two dollars and fifty cents"), and the script holds it as people write it ("$42.50")."""

import re
from dataclasses import asdict
from pathlib import Path

import numpy as np

from tests.planted_faults import SENTENCES, VOICES, Sentence, active_power, noise, span, speak, talk

RATE = 44100
# (as written in a script, as said by its reader)
WRITTEN = (
    ("Dr. Okafor paid $42.50 on March 3rd, 2021.",
     "Doctor Okafor paid forty-two dollars and fifty cents on March third, twenty twenty-one."),
    ("The NASA team met Eze at 10:30.", "The NASA team met Eze at ten thirty."),
    ("Mr. Smith lives at 14 Elm St. with 2 cats.", "Mister Smith lives at fourteen Elm Street with two cats."),
    ("About 5% of the 1,200 members voted.", "About five percent of the one thousand two hundred members voted."),
    ("Siobhan flew from Reykjavik to Nairobi on Flight 29.",
     "Siobhan flew from Reykjavik to Nairobi on flight twenty-nine."),
    ("The 1990s were good years for the FBI.", "The nineteen nineties were good years for the F B I."),
    ("Prof. Nguyen teaches 3 classes & 2 labs.", "Professor Nguyen teaches three classes and two labs."),
    ("The parcel weighs 5 kg and costs $12.", "The parcel weighs five kilograms and costs twelve dollars."),
    ("We met on June 12th at 7 pm.", "We met on June twelfth at seven P M."),
    ("Chapter 7 starts on page 143.", "Chapter seven starts on page one hundred forty-three."),
    ("Ms. Adebayo ran the 10 km race in 48 minutes.",
     "Miz Adebayo ran the ten kilometer race in forty-eight minutes."),
    ("Kwame sold 3,500 copies of his 2nd book.", "Kwame sold three thousand five hundred copies of his second book."),
)  # fmt: skip
# a dialogue: (voice, as written, as said); "(laughs)" is Dia's non-verbal tag, said as a laugh
DIALOGUE = (
    ("alice", "Did you finish the report for the meeting tomorrow?", None),
    ("bob", "Almost, I still need to check the figures in the last section.", None),
    ("alice", "Let me know if you want me to read it before you send it.", None),
    ("bob", "That would help a lot, thank you. (laughs)", "That would help a lot, thank you. Ha ha ha ha."),
    ("alice", "No problem at all, I have time this afternoon.", None),
    ("bob", "Great, I will send it to you right after lunch.", None),
    ("alice", "Perfect, and remember to attach the spreadsheet as well.", None),
    ("bob", "I will, and I will copy the whole team on it.", None),
)
TURN = re.compile(r"\[S[12]\]")


def _save(path: Path, samples: np.ndarray, rate: int, subtype: str = "PCM_16") -> None:
    import soundfile

    path.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(path), samples, rate, subtype=subtype)


def _truth(name, path, fault, samples, rate, found) -> dict:
    return {name: {"file": path, "fault": fault, "rate": rate, "seconds": len(samples) / rate,
                   "sentences": [asdict(s) for s in found]}}  # fmt: skip


def write_written_forms(folder, seed: int = 0) -> dict:
    """A script with written forms (numbers, money, dates, ordinals, times, titles, acronyms, units, names) beside the
    recording of its reading, and a clean control: the same voice reading plain sentences, with its script. Every
    sentence is good speech; each clip's text must be the script's words for what is said in it."""
    folder, truth = Path(folder), {}
    said = [spoken for _, spoken in WRITTEN]
    samples, found = talk(said, VOICES["alice"], RATE, seed + 200)
    for sentence, (written, _) in zip(found, WRITTEN, strict=True):
        sentence.text = written
    _save(folder / "forms/script.wav", samples, RATE)
    (folder / "forms/script.txt").write_text(" ".join(written for written, _ in WRITTEN) + "\n", encoding="utf-8")
    truth |= _truth("forms/script", "forms/script.wav", "written forms", samples, RATE, found)
    plain = list(SENTENCES[:8])
    samples, found = talk(plain, VOICES["alice"], RATE, seed + 201)
    _save(folder / "forms/plain.wav", samples, RATE)
    (folder / "forms/plain.txt").write_text(" ".join(plain) + "\n", encoding="utf-8")
    return truth | _truth("forms/plain", "forms/plain.wav", "clean control", samples, RATE, found)


def dialogue_samples(seed: int = 0) -> tuple[np.ndarray, list[Sentence]]:
    """The DIALOGUE said by alice's and bob's voices, a turn each sentence; each Sentence's `voice` names its speaker
    and its text is as written (with its tag)."""
    said = [spoken or written for _, written, spoken in DIALOGUE]
    samples, found = talk(said, [VOICES[speaker] for speaker, _, _ in DIALOGUE], RATE, seed + 300)
    for sentence, (speaker, written, _) in zip(found, DIALOGUE, strict=True):
        sentence.text, sentence.voice = written, speaker
    return samples, found


def write_dialogues(folder, seed: int = 0) -> dict:
    """The same two-voice dialogue twice: `talks/with-text` with its transcript (`[S1]`/`[S2]` turns and a
    `(laughs)`), `talks/no-text` without (it is diarized). Every turn is good speech."""
    folder, truth = Path(folder), {}
    samples, found = dialogue_samples(seed)
    tags, first = [], DIALOGUE[0][0]
    for speaker, written, _ in DIALOGUE:
        tags.append(f"[S{1 if speaker == first else 2}] {written}")
    for name, text in (("talks/with-text", " ".join(tags)), ("talks/no-text", None)):
        _save(folder / f"{name}.wav", samples, RATE)
        if text:
            (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
        truth |= _truth(name, f"{name}.wav", "dialogue", samples, RATE, found)
    return truth


def spoken_turns(turns: list[tuple[str, str, float]]) -> tuple[np.ndarray, list[Sentence]]:
    """(speaker, what is said, seconds of silence after it) said in turn after 0.5 s of silence, and 0.5 s after the
    last; a speaker is alice, bob or an espeak-ng voice. The samples at half of full scale, and each sentence where
    it is."""
    parts, found, at = [np.zeros(RATE // 2, np.float32)], [], RATE // 2
    for speaker, said, pause in turns:
        speech = speak(said, VOICES.get(speaker, speaker), RATE)
        found.append(Sentence(at / RATE, (at + len(speech)) / RATE, said, speaker))
        parts += [speech, np.zeros(int(pause * RATE), np.float32)]
        at += len(speech) + int(pause * RATE)
    samples = np.concatenate([*parts, np.zeros(RATE // 2, np.float32)])
    return (samples * (0.5 / np.abs(samples).max())).astype(np.float32), found


def write_quick_turns(folder, seed: int = 0, with_text: bool = False) -> dict:
    """The DIALOGUE's words without its laugh (`talks/quick`), each turn 80-200 ms after the last: no pause the
    speech detector cuts at (0.3 s), as people talk; `with_text`: its transcript beside it. Every turn is good
    speech."""
    rng = np.random.default_rng(seed + 700)
    turns = [(speaker, written.replace(" (laughs)", ""), rng.uniform(0.08, 0.2)) for speaker, written, _ in DIALOGUE]
    samples, found = spoken_turns(turns)
    _save(Path(folder) / "talks/quick.wav", samples, RATE)
    if with_text:
        tags = [f"[S{1 if s.voice == found[0].voice else 2}] {s.text}" for s in found]
        (Path(folder) / "talks/quick.txt").write_text(" ".join(tags) + "\n", encoding="utf-8")
    return _truth("talks/quick", "talks/quick.wav", "dialogue", samples, RATE, found)


def write_greeting_first(folder, seed: int = 0) -> dict:
    """The DIALOGUE's words without its transcript or its laugh (`talks/greeting`), bob's first, after alice's "Hi
    there!" 120 ms before them (one piece to the speech detector: its first window is mostly bob's); then turns
    0.5-0.9 s apart. alice, heard first, is [S1]."""
    rng = np.random.default_rng(seed + 800)
    turns = [("alice", "Hi there!", 0.12)]
    turns += [
        (speaker, written.replace(" (laughs)", ""), rng.uniform(0.5, 0.9)) for speaker, written, _ in DIALOGUE[1:]
    ]
    samples, found = spoken_turns(turns)
    _save(Path(folder) / "talks/greeting.wav", samples, RATE)
    return _truth("talks/greeting", "talks/greeting.wav", "dialogue", samples, RATE, found)


def write_quick_replies(folder, seed: int = 0) -> dict:
    """The DIALOGUE's words without its laugh (`talks/replies`), turns 0.6-0.9 s apart, and after each of alice's
    sentences bob's quick "Yes." or "Sure." 0.1 s after it, alice going on 0.12 s later: one piece to the speech
    detector, the reply inside it, not at its end. alice is [S1]."""
    rng = np.random.default_rng(seed + 900)
    turns = []
    for number, (speaker, written, _) in enumerate(DIALOGUE):
        said = written.replace(" (laughs)", "")
        if speaker == "alice":
            turns += [("alice", said, 0.1), ("bob", ("Yes.", "Sure.")[number % 4 // 2], 0.12)]
            turns += [("alice", "Right, go on then.", rng.uniform(0.6, 0.9))]
        else:
            turns.append(("bob", said, rng.uniform(0.6, 0.9)))
    samples, found = spoken_turns(turns)
    _save(Path(folder) / "talks/replies.wav", samples, RATE)
    return _truth("talks/replies", "talks/replies.wav", "dialogue", samples, RATE, found)


def write_alike_voices(folder, seed: int = 0) -> dict:
    """Two alike espeak-ng men (en+m1, en+m2: their means 0.84 alike in GE2E, where spectral clustering's eigengap
    hears one voice) in `talks/alike`: the DIALOGUE's words and six list-like sentences, turns of one or two
    sentences 0.4-0.8 s apart; and `talks/alone`, the same words all by en+m1. Every sentence is good speech."""
    rng = np.random.default_rng(seed + 1000)
    said = [written.replace(" (laughs)", "") for _, written, _ in DIALOGUE] + like_sentences(6, seed)
    speakers = ["en+m1", "en+m2"] * 3 + ["en+m1", "en+m1", "en+m2", "en+m2"] * 2
    truth = {}
    for name, voices in (("talks/alike", speakers), ("talks/alone", ["en+m1"] * len(said))):
        turns = [(voice, text, rng.uniform(0.4, 0.8)) for voice, text in zip(voices, said, strict=True)]
        samples, found = spoken_turns(turns)
        _save(Path(folder) / f"{name}.wav", samples, RATE)
        truth |= _truth(name, f"{name}.wav", "dialogue", samples, RATE, found)
    return truth


def write_faults_in_pieces(folder, seed: int = 0) -> dict:
    """faults inside sentences of one recording (its other sentences clean): three digital dropouts (50-150 ms of
    zeros inside words) in sentence 1, a +12 dB gain step inside a word of sentence 3 (the rest of the recording
    louder), clicks (single-sample spikes) in sentence 5."""
    folder = Path(folder)
    texts = list(SENTENCES[12:20])
    samples, found = talk(texts, VOICES["bob"], RATE, seed + 400)
    rng = np.random.default_rng(seed + 401)
    # room for the gain step, and a microphone's noise floor (60 dB under the speech): no digital silence but faults'
    samples = samples * np.float32(0.2) + (1e-4 * rng.standard_normal(len(samples))).astype(np.float32)

    def inside(sentence, share):
        said = span(sentence, RATE)
        return said.start + int((said.stop - said.start) * share)

    for share, length in ((0.25, 0.05), (0.5, 0.1), (0.75, 0.15)):
        at = inside(found[1], share)
        samples[at : at + int(length * RATE)] = 0.0
    step = inside(found[3], 0.5)
    samples[step:] *= np.float32(10 ** (12 / 20))
    for share in (0.2, 0.45, 0.7):
        at = inside(found[5], share)
        samples[at] = np.float32(0.95 * (1 if rng.random() < 0.5 else -1))
    for number, fault in ((1, "dropouts"), (3, "gain step"), (5, "clicks")):
        found[number] = Sentence(found[number].start, found[number].end, found[number].text, found[number].voice,
                                 True, fault)  # fmt: skip
    _save(folder / "faults/in-pieces.wav", samples, RATE)
    (folder / "faults/in-pieces.txt").write_text(" ".join(texts) + "\n", encoding="utf-8")
    return _truth("faults/in-pieces", "faults/in-pieces.wav", "faults inside pieces", samples, RATE, found)


def write_one_channel_stereo(folder, seed: int = 0) -> dict:
    """A stereo recording with clean speech in its left channel and pink noise (as loud as the speech) in its right,
    and its script: all its speech is good, heard in the left channel."""
    folder = Path(folder)
    texts = list(SENTENCES[4:10])
    samples, found = talk(texts, VOICES["alice"], RATE, seed + 500)
    right = noise("pink", len(samples), RATE, seed + 501)
    right *= np.float32(np.sqrt(active_power(samples, found, RATE) / np.mean(right.astype(np.float64) ** 2)))
    _save(folder / "channels/left-speech.wav", np.stack([samples, right * np.float32(0.5)], axis=1), RATE)
    (folder / "channels/left-speech.txt").write_text(" ".join(texts) + "\n", encoding="utf-8")
    return _truth("channels/left-speech", "channels/left-speech.wav", "speech in one channel", samples, RATE, found)


COLOURS = ("red", "blue", "green", "yellow", "black", "white", "grey", "brown")
THINGS = ("widget", "bolt", "lamp", "cable", "hinge", "valve", "panel", "spring")


def like_sentences(count: int, seed: int = 0) -> list[str]:
    """A list-like script: sentences of one form, a number and a few words apart ("Item 42 is a red lamp with a
    blue cap.")."""
    rng = np.random.default_rng(seed)
    pick = rng.choice
    return [
        f"Item {rng.integers(2, 100)} is a {pick(COLOURS)} {pick(THINGS)} with a {pick(COLOURS)} cap."
        for _ in range(count)
    ]


def write_read_by(folder, name: str, voice: str, pairs, seed: int = 0) -> dict:
    """`pairs` (as written, as said: None where said as written) read by one `voice` (espeak-ng's, or "flite:slt")
    into NAME.wav, the written forms its script: all good speech."""
    folder = Path(folder)
    samples, found = talk([said or written for written, said in pairs], voice, RATE, seed + 600)
    for sentence, (written, _) in zip(found, pairs, strict=True):
        sentence.text = written
    _save(folder / f"{name}.wav", samples, RATE)
    (folder / f"{name}.txt").write_text(" ".join(written for written, _ in pairs) + "\n", encoding="utf-8")
    return _truth(name, f"{name}.wav", f"read by {voice}", samples, RATE, found)


def tag_errors(truth: dict, report: dict) -> dict[str, int]:
    """Per dialogue recording, its kept clips whose speaker tags are not its turns: the clip's tags in order (a tag
    again for the same voice not counted) must be the voices of the sentences said in it, its recording's first
    voice `[S1]`, the other `[S2]`."""
    from tests.planted_faults import _covered

    errors = {}
    for name, planted in truth.items():
        sentences = [Sentence(**s) for s in planted["sentences"]]
        first = sentences[0].voice
        errors[name] = 0
        for clip in report.get("clips", []):
            if clip.get("recording") != name or clip.get("dropped"):
                continue
            inside = [s for s in sentences if _covered(s.start, s.end, [(clip["start"], clip["end"])])
                      > (s.end - s.start) / 2]  # fmt: skip
            expected = collapsed(["[S1]" if s.voice == first else "[S2]" for s in inside])
            errors[name] += collapsed(TURN.findall(clip.get("text", ""))) != expected
    return errors


def collapsed(tags: list[str]) -> list[str]:
    return [tag for number, tag in enumerate(tags) if not number or tags[number - 1] != tag]
