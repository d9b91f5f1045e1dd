"""The align stage: a recording's own text (NAME.txt) split over its pieces, by forced alignment of candidate parts
to each piece's audio (English), or through the pieces' transcripts (other languages); what is kept is the text as
written, speaker turns `[S1]`/`[S2]` included.
"""

import difflib
import functools
import hashlib
import itertools
import math
import re
from collections import Counter

import numpy as np

from tpu_demo.evaluation.intelligibility import normalise
from tpu_demo.model.tokens import TEXT_TAGS
from tpu_demo.segmenting.measure import Piece
from tpu_demo.segmenting.read import RATE, Recording, to_model_rate
from tpu_demo.segmenting.spoken import (
    GRAMMAR_WORD,
    SAID_READINGS,
    SOUND,
    as_written,
    before_a_name,
    is_sound,
    pronunciations,
    reading_of,
    said_characters,
    spoken_text,
    tokens,
)
from tpu_demo.segmenting.transcribe import pcm16

UNIT_END = re.compile(r"[.!?;:,][\"')\]]*$")  # a written word that ends a unit of text (text_units)
SEARCH_SKIP, SEARCH_UNITS, SEARCH_TRIES = 2, 4, 6  # align_text's search for each piece's part of the text
MAX_PART_UNITS = 16  # the most units of text one piece is tried with (part_units)
TURN_CHANGE_COST = 0.5  # a part's turn changes make it less likely: turns part at pauses, but for quick turns
LENGTH_TRIES = 3  # parts tried after the likeliest SEARCH_TRIES where none aligned cleanly: the likeliest by length
SOUND_CHARACTERS = 15  # a non-verbal sound (a laugh) lasts about as long as this many characters said
RESYNC_UNITS, RESYNC_TRIES = 40, 8  # a piece the search near the last taken part missed: parts this far on
# a right text's fit (Aligner: thousandths of a log-likelihood a frame) is at most FIT_BAND under the recording's
# median, and FIT_MARGIN over a part of other units of the text
FIT_BAND, FIT_MARGIN = 1.2, 0.25
ANCHOR_SECONDS = 1.0  # a subtitle cue's time and the speech it holds may differ by this much
MIN_FITS = 5  # taken parts before their median judges the next (all are judged by the recording's at the end)
LOOP_FIT = 0.0  # a right text's fit, about the free phone loop's: judges a far part before the recording has a median
RESYNC_CHARACTERS = 12  # the fewest spoken characters of a part found that way: a short one ("Yes.") fits anywhere
SECONDS_PER_CHARACTER = 0.075  # a guess at the pace where a recording has no characters to tell its own
ALIGN_SILENCE = 0.4  # seconds: an aligner's silence longer than this inside a piece of speech: speech its text lacks
ACCENT_PIECES = 3  # pieces in which a word is said otherwise, the same way, before that is the speaker's way
SAID_OTHERWISE = "its part of the text leaves out or names otherwise what is said"  # a taken part's drop detail
# a "-teen" before a sound its "n" runs into, heard as its "-ty", was said so where the grammar heard under this
# share of the voice's RUNS_ON_EVIDENCE or more such "-teen"s in a recording (in its pieces whose text stands) so;
# else it may be the voice's way (the grammar heard 0-25 % of flite's right ones as "-ty", 43-82 % of three
# espeak-ng voices'), and fewer do not tell (espeak-ng's "14 Elm St.", the only one of a script)
RUNS_ON_SHARE, RUNS_ON_EVIDENCE = 0.5, 4
FILLERS = ("um", "uh", "er")  # what a speaker says between words that a clean transcript leaves out ("ah": a vowel)
# number words that sound alike: "fifteen" read "fifty" aligns cleanly and fits the phone loop as well
TEENS = dict(
    zip(
        ("thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"),
        ("thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"),
        strict=True,
    )
)
TEENS |= {f"{teen}th": f"{ty[:-1]}ieth" for teen, ty in TEENS.items()}  # "fourteenth", "fortieth"
LIKE_SOUNDING = TEENS | {ty: teen for teen, ty in TEENS.items()}
# closed classes whose members a reader says for one another ("Thursday" read "Tuesday", "seventeen" read "seven"):
# a grammar of the class tells them apart better than a forced alignment, which fits any of them (Aligner.swapped)
CLASSES = (
    ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"),
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
     "december"),
    ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
     *(teen for teen in TEENS if not teen.endswith("th")), "twenty",
     *(ty for teen, ty in TEENS.items() if not teen.endswith("th"))),
    ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
     "twelfth", *(teen for teen in TEENS if teen.endswith("th")), "twentieth",
     *(ty for teen, ty in TEENS.items() if teen.endswith("th"))),
)  # fmt: skip
CLASS_OF = {word: members for members in CLASSES for word in members}
UNITS = {"one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}  # "ninety eight": no "-teen" there
# a year's next part after its "-teen" ("nineteen ninety", "nineteen oh two", "nineteen nineties"): not a "-teen",
# which more often starts a sentence of its own ("... fourteen. Eighteen more")
TYS = {ty for ty in TEENS.values() if ty.endswith("y")}
COMPOUND = TYS | {f"{ty[:-1]}ies" for ty in TYS} | {"oh", "hundred"}
# ARPAbet: a "-teen"'s "n" runs into a next word that starts with a vowel, a nasal or an approximant
RUNS_ON = ("AA", "AE", "AH", "AO", "AW", "AY", "EH", "ER", "EY", "IH", "IY", "OW", "OY", "UH", "UW")
RUNS_ON += ("N ", "M ", "W ", "L ", "R ", "Y ")
TURN = re.compile(r"^\[S\d\]$")
TURN_CHANGE = re.compile(r"(?<=\S)\s+\[S\d\]")  # a speaker tag after the start of a part
ALIGNER = "a39"  # the version of Aligner's judgement and of the spoken forms: a change here aligns every piece again


def words_of(text: str) -> list[tuple[str, str]]:
    """(normalised word, what is written) pairs; a tag (`[S2]`) travels with the word after it, a token of no word
    (a dash) with the word before it."""
    pairs, ahead = [], []
    for token in tokens(text):
        word = SOUND if is_sound(token) else normalise(token)
        if TEXT_TAGS.fullmatch(token) or (not word and not pairs):
            ahead.append(token)
        elif not word:
            pairs[-1] = (pairs[-1][0], f"{pairs[-1][1]} {token}")
        else:
            pairs.append((word, " ".join([*ahead, token])))
            ahead = []
    return pairs


def split_by_transcripts(text: str, transcripts: list[str]) -> list[str]:
    """`text`, said over clips whose `transcripts` the recogniser heard, split into each clip's part: each written
    word goes to the clip of the heard word it aligns with; a word heard nowhere goes with the word before it."""
    given = words_of(text)
    if not transcripts:
        return []
    heard, clip_of = [], []
    for number, transcript in enumerate(transcripts):
        words = normalise(transcript).split()
        heard += words
        clip_of += [number] * len(words)
    owner = [None] * len(given)
    matcher = difflib.SequenceMatcher(a=[word for word, _ in given], b=heard, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("equal", "replace"):
            for k in range(i1, i2):
                owner[k] = clip_of[j1 + (k - i1) * (j2 - j1) // (i2 - i1)]
    for k in range(len(given)):  # words heard nowhere: with the word before (at the start: the word after)
        if owner[k] is None:
            before = next((owner[i] for i in range(k - 1, -1, -1) if owner[i] is not None), None)
            after = next((owner[i] for i in range(k + 1, len(given)) if owner[i] is not None), 0)
            owner[k] = before if before is not None else after
    parts = [[] for _ in transcripts]
    turn = "[S1]"
    for (_, written), number in zip(given, owner, strict=True):
        if not parts[number]:  # a clip that starts inside a turn says whose it is
            first = written.split()[0]
            parts[number].append(written if TURN.match(first) else f"{turn} {written}")
        else:
            parts[number].append(written)
        turn = next((token for token in reversed(written.split()) if TURN.match(token)), turn)
    return [" ".join(part) for part in parts]


def spoken_characters(text: str, language: str | None = None) -> int:
    """The characters of the words said for `text` (English: its numbers, dates and abbreviations as said)."""
    if language and not language.lower().startswith("en"):
        return len(normalise(text).replace(" ", ""))
    words = spoken_text(text).split()
    return sum(SOUND_CHARACTERS if word == SOUND else said_characters(word) for word in words)


def disagreement(text: str, transcript: str) -> float:
    """The character error rate of `transcript` against `text` (normalised as for `eval_asr_model`)."""
    import jiwer

    return float(jiwer.cer(normalise(text), normalise(transcript) or ""))


def give_texts(pieces: list[Piece], recording: Recording, max_asr_cer: float) -> None:
    """Each piece's text: its part of the recording's own text (checked against its transcript), else what the
    recogniser heard."""
    if recording.text is not None:
        parts = split_by_transcripts(recording.text, [piece.transcript or "" for piece in pieces])
        for piece, part in zip(pieces, parts, strict=True):
            piece.text = part
            if piece.dropped:
                continue
            if not normalise(part):
                piece.dropped, piece.detail = "no text aligned", "none of the recording's text aligns with it"
            elif (cer := disagreement(part, piece.transcript or "")) > max_asr_cer:
                piece.dropped, piece.detail = "recogniser disagrees", f"CER {cer:.2f} > max_asr_cer {max_asr_cer}"
        return
    for piece in pieces:
        if not piece.dropped:
            piece.text = f"{piece.turn or '[S1]'} {piece.transcript}" if normalise(piece.transcript or "") else ""
            if not piece.text:
                piece.dropped, piece.detail = "no words heard", "the recogniser heard no words"


def alignment_key(start: float, end: float, text: str) -> str:
    """A forced alignment of a text to a span of a recording is cached by the span, the words of the text and the
    aligner's version (ALIGNER)."""
    return f"{ALIGNER} {start:.3f}-{end:.3f} {hashlib.sha256(spoken_text(text).encode()).hexdigest()[:16]}"


def aligns(recording: Recording, settings) -> bool:
    """Whether a recording's own text is split over its pieces by forced alignment (English, pocketsphinx's
    dictionary); other languages' through the recogniser's transcripts (`give_texts`)."""
    language = settings.segment_language
    return recording.text is not None and not (language and not language.lower().startswith("en"))


def text_units(text: str) -> list[list[tuple[str, str]]]:
    """The text's words (`words_of`) in units that end at punctuation (. ! ? ; : ,): where pauses fall, and so where
    pieces start and end."""
    units, unit, pairs = [], [], words_of(text)
    for number, pair in enumerate(pairs):
        unit.append(pair)
        last, following = pair[1].split()[-1], pairs[number + 1][1] if number + 1 < len(pairs) else ""
        previous = pairs[number - 1][1].split()[-1] if number else ""
        # no end after a title or an initial ("Dr. Okafor"), nor at a comma inside a date or a number ("3rd, 2021")
        inside = before_a_name(last, previous, following) or (last.endswith(",") and following[:1].isdigit())
        sound = pair[0] == SOUND or (number + 1 < len(pairs) and pairs[number + 1][0] == SOUND)
        if (UNIT_END.search(last) and not inside) or sound:  # a non-verbal tag is a unit: a sound between pauses
            units.append(unit)
            unit = []
    return units + ([unit] if unit else [])


def unit_texts(units) -> list[str]:
    """Each unit as written, with the speaker turn it is said in at its start."""
    turn, texts = "[S1]", []
    for unit in units:
        written = " ".join(word for _, word in unit)
        texts.append(written if TURN.match(written.split()[0]) else f"{turn} {written}")
        turn = next((token for token in reversed(written.split()) if TURN.match(token)), turn)
    return texts


def align_text(pieces: list[Piece], recording: Recording, align_piece) -> None:
    """Each piece's part of its recording's own text, found by aligning candidate parts to its audio (`align_piece
    (piece, text)`: Aligner's result), in the text's order: a part starts where the previous aligned piece's ended,
    or after up to SEARCH_SKIP units (text said in no piece) plus those the pieces that did not align since would
    have said at the pace so far (before any, the recording's: its speech over its text); parts of 1 to SEARCH_UNITS
    units or as many as the piece holds (`part_units`), the likeliest first (its characters against the piece's
    length; a skip of none, or of the units those pieces said; fewer turn changes), at most SEARCH_TRIES, then
    the LENGTH_TRIES likeliest by length alone (quick turns: several in one piece). Where none is taken, parts of
    about the piece's length up to RESYNC_UNITS units further on (a skipped block), the nearest first, at most
    RESYNC_TRIES. Never a part before the last one taken: a piece whose text cannot be established is dropped as
    `uncertain alignment`, not given another's.

    A part is taken (`best_part`) only if it aligns without a problem, fits the audio as well as the recording's
    other pieces' texts fit theirs (its `fit`, the alignment's log-likelihood a frame over a free phone loop's, within
    FIT_BAND of their median, half that for a part out of step: one that skips text, or after pieces none was taken
    for) and fits clearly better than a part of other units (FIT_MARGIN): a sentence of about the same length and
    words aligns too, and fits worse. With subtitles (`recording.cues`), the parts tried are those whose cues are
    about where the piece is. Each piece carries its alignment's confidence (`confidence`)."""
    units = text_units(recording.text)
    times = unit_times(units, recording.cues) if recording.cues else None
    texts, at, paces = unit_texts(units), 0, []
    characters = [spoken_characters(unit) for unit in texts]
    speech, written = sum(piece.end - piece.start for piece in pieces), sum(characters)
    first_pace = speech / written if speech and written else SECONDS_PER_CHARACTER
    lost, fits, taken = 0.0, [], {}  # seconds of the pieces since the last taken; the taken parts' fits
    for piece in pieces:
        seconds, pace = piece.end - piece.start, float(np.median(paces)) if paces else first_pace
        expected, missed = seconds / pace, units_within(characters, at, lost / pace)
        most = part_units(characters, at, expected)
        candidates = [(at + skip, length) for skip in range(SEARCH_SKIP + missed + 1)
                      for length in range(1, most + 1) if at + skip + length <= len(units)]  # fmt: skip
        if at and not lost and sound_only(texts[at - 1]):  # a laugh the last part ended with goes on in this piece
            candidates += [(at - 1, length + 1) for length in range(1, most + 1) if at + length <= len(units)]
        if times:  # subtitles: the units whose cues are about where the piece is, wherever the search has got to
            candidates = [(start, length) for start in range(at, len(units)) for length in range(1, SEARCH_UNITS + 1)
                          if start + length <= len(units) and all(near(times[unit], piece) for unit in
                                                                  range(start, start + length))]  # fmt: skip

        def likely(candidate, expected=expected, at=at, missed=missed, turn_cost=TURN_CHANGE_COST):
            start, length = candidate
            said = sum(characters[start : start + length])
            changes = len(TURN_CHANGE.findall(joined_text(texts[start : start + length])))  # turns part at pauses
            return (
                abs(said - expected) / max(expected, 1.0)
                + 0.25 * min(abs(start - at), abs(start - at - missed))
                + (turn_cost * changes)
            )

        tries = sorted(candidates, key=likely)[:SEARCH_TRIES]
        # then the likeliest by length alone: quick turns put several in one piece
        tries += [c for c in sorted(candidates, key=functools.partial(likely, turn_cost=0.0)) if c not in tries][
            :LENGTH_TRIES
        ]
        typical = float(np.median(fits)) if len(fits) >= MIN_FITS else None
        # in step: where the last taken part ended, no piece lost since (or at its subtitles' time)
        found = best_part(
            piece, tries, texts, align_piece, typical, lambda c, at=at, lost=lost: times or (c[0] == at and not lost)
        )
        if found["part"] is None and not times:  # forward only: about the piece's length, a block never said
            further = sorted(further_parts(characters, at, expected, tries), key=lambda c: (c[0], likely(c)))
            resynced = (
                best_part(piece, further[:RESYNC_TRIES], texts, align_piece, reference(typical), lambda c: False)
                if further
                else found
            )
            found = resynced if resynced["part"] is not None else found  # else why its likeliest part failed
        if found["part"] is not None:
            (start, length), result = found["part"]
            piece.text = joined_text(texts[start : start + length])
            taken[id(piece)] = (result, found["margin"], found["band"])
            fits.append(result["fit"])
            paces.append(seconds / max(spoken_characters(piece.text), 1))
            at, lost = start + length, 0.0
            continue
        lost += seconds
        failure = found["failure"]
        piece.alignment = failure["confidence"] if failure else None
        if found["why"]:  # aligned, not taken: the confidence that said no
            own = typical if typical is not None else failure["fit"]
            piece.alignment = confidence(failure, own, found["margin"], found["band"])
        if not piece.dropped:
            piece.dropped = "uncertain alignment"
            piece.detail = failure_detail(failure, found["why"])
    judge_taken(pieces, taken, float(np.median(fits)) if fits else 0.0)


def sound_only(text: str) -> bool:
    """A unit of text that says nothing: a non-verbal sound ("[S2] (laughs)")."""
    return set(spoken_text(text).split()) == {SOUND}


def part_units(characters: list[int], at: int, expected: float) -> int:
    """The most units a part from `at` may have: SEARCH_UNITS, or as many as a piece of `expected` characters holds
    (half again, up to MAX_PART_UNITS): a stretch of quick turns with no pause is one piece of many sentences."""
    held, said = 0, 0
    while at + held < len(characters) and held < MAX_PART_UNITS and said + characters[at + held] <= 1.5 * expected:
        said += characters[at + held]
        held += 1
    return max(SEARCH_UNITS, held)


def further_parts(characters: list[int], at: int, expected: float, tries) -> list[tuple[int, int]]:
    """Parts (start, length) of about `expected` characters (within 35 %, at least RESYNC_CHARACTERS) up to
    RESYNC_UNITS units after `at`, not among `tries`: a piece's text after a block the reader skipped."""
    return [(start, length) for start in range(at + 1, min(at + RESYNC_UNITS, len(characters)))
            for length in range(1, SEARCH_UNITS + 1)
            if (start, length) not in tries and start + length <= len(characters)
            and abs(sum(characters[start : start + length]) - expected) <= 0.35 * expected
            and sum(characters[start : start + length]) >= RESYNC_CHARACTERS]  # fmt: skip


def judge_taken(pieces: list[Piece], taken: dict, typical: float) -> None:
    """Each taken part judged by the recording's own median fit (`typical`: its first pieces were taken before there
    was one): its confidence, and under 0.5 the piece dropped; so is one whose part leaves out a filler or names a
    word said otherwise (Aligner.said_otherwise): the part is the piece's, the text is not what is said. A word
    said otherwise in ACCENT_PIECES taken parts or more is the speaker's way of saying it (espeak-ng's RP "Derby",
    "darby", in 12 of a list's 104), not another word. A "-teen" before a sound its "n" runs into that the grammar
    hears as its "-ty" (Aligner.heard_as) drops its piece where the grammar heard under RUNS_ON_SHARE of the voice's
    RUNS_ON_EVIDENCE or more such "-teen"s so, in the pieces not dropped (a dialogue's voices each by themselves):
    there the grammar tells them apart."""
    said_so = Counter(result.get("otherwise_word") for result, _, _ in taken.values())

    def accent(word: str | None) -> bool:
        return word is not None and said_so[word] >= ACCENT_PIECES

    for piece in pieces:
        if id(piece) in taken:
            result, margin, band = taken[id(piece)]
            piece.alignment = confidence(result, typical, margin, band)
            if piece.alignment < 0.5 and not piece.dropped:
                piece.dropped = "uncertain alignment"
                piece.detail = failure_detail(result, fit_problem(result["fit"], typical, margin, band))
            elif result.get("otherwise") and not piece.dropped and not accent(result.get("otherwise_word")):
                piece.dropped = "uncertain alignment"
                piece.detail = f"{SAID_OTHERWISE}: {result['otherwise']}"
    voice_of, speaker, checked, heard_ty = {}, "[S1]", Counter(), Counter()
    for piece in pieces:  # a dialogue's voices each have their way: a piece's is the turn it starts in
        result = taken[id(piece)][0] if id(piece) in taken and not piece.dropped else {}
        tags = [token for token in (piece.text or "").split() if TURN.match(token)] if id(piece) in taken else []
        voice_of[id(piece)] = tags[0] if tags and piece.text.startswith(tags[0]) else speaker
        speaker = tags[-1] if tags else speaker
        for _, other in result.get("runs_on", []):
            checked[voice_of[id(piece)]] += 1
            heard_ty[voice_of[id(piece)]] += other is not None
    judged = {voice for voice, count in checked.items()
              if count >= RUNS_ON_EVIDENCE and heard_ty[voice] < RUNS_ON_SHARE * count}  # fmt: skip

    for piece in pieces:
        said = [entry for entry in taken[id(piece)][0].get("runs_on", []) if entry[1]] if id(piece) in taken else []
        if said and not piece.dropped and voice_of[id(piece)] in judged:
            piece.dropped = "uncertain alignment"
            piece.detail = f"{SAID_OTHERWISE}: '{as_written(said[0][0])}' said as '{said[0][1]}'"


def unit_times(units, cues) -> list[tuple[float, float]] | None:
    """Each unit's time in the recording, from the cues its words are in (subtitles.Cue); None where the cues'
    words do not add up to the units'."""
    counts = [len(words_of(cue.text)) for cue in cues]
    if sum(counts) != sum(len(unit) for unit in units):
        return None
    cue_of, times, at = [number for number, count in enumerate(counts) for _ in range(count)], [], 0
    for unit in units:
        times.append((cues[cue_of[at]].start, cues[cue_of[at + len(unit) - 1]].end))
        at += len(unit)
    return times


def near(time: tuple[float, float], piece: Piece) -> bool:
    """Whether a cue's time overlaps the piece's, give or take ANCHOR_SECONDS (subtitles are timed by hand)."""
    return time[0] <= piece.end + ANCHOR_SECONDS and time[1] >= piece.start - ANCHOR_SECONDS


def confidence(result: dict, typical: float, margin: float | None, band: float = FIT_BAND) -> float:
    """A taken part's confidence, 0-1: the least of the alignment's own (speech its text lacks, words squeezed), its
    fit against the recording's typical (0.5 at `band` under it: FIT_BAND, half that for a part out of step)
    and its margin over a part of other units (0.5 at FIT_MARGIN); under 0.5, the part is not taken."""
    by_fit = 1 / (1 + np.exp(-4 * (band - (typical - result["fit"])) / band))
    by_margin = 1.0 if margin is None else 1 / (1 + np.exp(-4 * (margin - FIT_MARGIN) / FIT_MARGIN))
    return round(float(min(result["confidence"], by_fit, by_margin)), 3)


def fit_problem(fit: float, typical: float | None, margin: float | None, band: float = FIT_BAND) -> str | None:
    """Why a part that aligns is not taken: it fits worse than the recording's other texts, or no better than a part
    of other units."""
    if typical is not None and fit < typical - band:
        return f"its text fits the audio worse than the recording's others ({fit:.2f} against {typical:.2f} a frame)"
    if margin is not None and margin < FIT_MARGIN:
        return f"another part of the text fits it almost as well ({margin:.2f} a frame apart)"
    return None


def failure_detail(result: dict | None, why: str | None) -> str:
    if result is None:
        return "none of its recording's text is left to align"
    problem = why or result["problem"]
    return f"no part of its recording's text aligns: {problem} (alignment confidence {result['confidence']:.2f})"


def reference(typical: float | None) -> float:
    """What a part found by the search further on is judged by: the recording's typical fit, or before there is one,
    the free phone loop's (a right text fits about as well): a first piece whose own text did not align took a
    sentence five on at fit -3.1, and the pieces after it far parts too."""
    return LOOP_FIT if typical is None else typical


def best_part(piece, candidates, texts, align_piece, typical: float | None, in_step) -> dict:
    """The candidate (start, length) whose part fits the piece best, if it is taken (see align_text): tried in
    order until one aligns without a problem, and then one of other units, to compare (at most all of them).
    `part`: (candidate, result) or None; `margin`: its fit over the best of other units (None: none aligned);
    `failure`: the first failed result; `why`: why an aligned part was not taken; `band`: the band it is judged
    by, FIT_BAND where `in_step(candidate)`, else half that (a part that skips text, or after pieces lost)."""
    results, parts, chosen = {}, {}, None
    for candidate in candidates:
        if chosen is not None and overlaps(candidate, chosen):
            continue
        parts[candidate] = joined_text(texts[candidate[0] : sum(candidate)])
        results[candidate] = align_piece(piece, parts[candidate])
        if chosen is not None:
            break  # the one of other units to compare with
        if not results[candidate]["problem"]:
            chosen = candidate
    said = {c: spoken_text(part) for c, part in parts.items()}
    # a part of sounds only (a laugh) aligns as pocketsphinx's filler, which fits any speech: taken where its
    # length makes it the likeliest, never compared by fit
    worded = {c for c in results if not sound_only(parts[c])}
    clean = [c for c, result in results.items() if not result["problem"]]
    failure = next((result for result in results.values() if result["problem"]), None)
    if not clean:
        return {"part": None, "margin": None, "failure": failure, "why": None, "band": FIT_BAND}
    best = (
        clean[0] if clean[0] not in worded else max((c for c in clean if c in worded), key=lambda c: results[c]["fit"])
    )
    others = [results[c]["fit"] for c in results if c in worded and best in worded and not overlaps(c, best)
              and said[c] != said[best] and results[c].get("fit") is not None]  # fmt: skip
    margin = results[best]["fit"] - max(others) if others else None
    band = FIT_BAND if in_step(best) else FIT_BAND / 2
    why = fit_problem(results[best]["fit"], typical, margin, band)
    if why:
        return {"part": None, "margin": margin, "failure": results[best], "why": why, "band": band}
    return {"part": (best, results[best]), "margin": margin, "failure": failure, "why": None, "band": band}


def overlaps(one: tuple[int, int], other: tuple[int, int]) -> bool:
    return one[0] < sum(other) and other[0] < sum(one)


def units_within(characters: list[int], at: int, said: float) -> int:
    """How many units from `at` hold about `said` characters (the text of pieces that did not align)."""
    count, total = 0, 0.0
    while at + count < len(characters) and total + characters[at + count] / 2 <= said:
        total += characters[at + count]
        count += 1
    return count


def joined_text(parts: list[str]) -> str:
    """The texts of neighbouring pieces as one, a part that goes on in the same speaker turn without its tag."""
    words, turn = [], None
    for part in parts:
        tokens = part.split()
        if tokens and TURN.match(tokens[0]) and tokens[0] == turn:
            tokens = tokens[1:]
        words += tokens
        turn = next((token for token in reversed(words) if TURN.match(token)), turn)
    return " ".join(words)


def loud_frames(audio16k: np.ndarray, frame: int, quiet_db: float) -> np.ndarray:
    """Whether each `frame`-sample frame is as loud as speech: within `quiet_db` of the piece's loud frames."""
    frames = audio16k[: len(audio16k) // frame * frame].reshape(-1, frame)
    levels = 10 * np.log10((frames.astype(np.float64) ** 2).mean(axis=1) + 1e-12)
    return levels > (np.percentile(levels, 95) - quiet_db if len(levels) else 0.0)


def known(decoder, word: str, guesses: list[str] | None = None) -> bool:
    """Whether `word` is in the decoder's dictionary, or made so: with the pronunciations `guesses` (gruut's and
    espeak-ng's of a name, or a word of gruut's lexicon the decoder's lacks; the alignment takes the one the audio
    fits), else as a compound of two words it holds ("windowsill")."""
    if decoder.lookup_word(word) is not None:
        return True
    for number, phones in enumerate(guesses or []):
        decoder.add_word(word if not number else f"{word}({number + 1})", phones, True)
    if guesses:
        return True
    for cut in range(2, len(word) - 1):
        head, tail = decoder.lookup_word(word[:cut]), decoder.lookup_word(word[cut:])
        if head and tail:
            decoder.add_word(word, f"{head} {tail}", True)
            return True
    return False


def unknown_words(decoder, words: list[str], given: dict) -> list[str]:
    """The words of `words` the decoder's dictionary lacks and that cannot be made known (`known`, with the
    pronunciations `given`); the others are known to it after."""
    return [word for word in dict.fromkeys(words) if not known(decoder, word, given.get(word))]


def phones(decoder, word: str) -> int:
    """How many phones the decoder's dictionary gives `word` (a variant, "word(2)", too); 1 if it has none."""
    return len((decoder.lookup_word(word) or "x").split())


def flag_runs(flags: np.ndarray, gap: int) -> list[int]:
    """The set flags in each run of them, a run going on over fewer than `gap` unset ones (a word's stops)."""
    runs, last = [], None
    for index in np.flatnonzero(flags):
        if last is not None and index - last <= gap:
            runs[-1] += 1
        else:
            runs.append(1)
        last = index
    return runs


def silence_runs(segments) -> dict[int, int]:
    """The runs of consecutive silences among an alignment's segments, a non-verbal sound's filler (SOUND) in them
    (a laugh put half in the silences around it): {first segment's number: last's}."""
    runs, first = {}, None
    for number, segment in enumerate(segments):
        if segment.word not in ("<sil>", SOUND):
            first = None
        elif first is None:
            first = runs[number] = number
        else:
            runs[first] = number
    return runs


def log_likelihood(segments) -> float:
    """The acoustic log-likelihood of a decoding: its segments' scores (pocketsphinx gives each as a probability;
    one under 1e-300, a long stretch that fits nothing, counts as that)."""
    return sum(math.log(max(segment.ascore, 1e-300)) for segment in segments)


def frame_log_likelihoods(segments, pcm: bytes, frame: float) -> np.ndarray:
    """Each frame's share of its segment's acoustic log-likelihood (`log_likelihood`), over the frames of `pcm` (16-bit
    samples) at `frame` seconds a frame, with room for the decoder's last."""
    per_frame = np.zeros(len(pcm) // 2 // round(frame * RATE) + 2)
    for segment in segments:
        frames = segment.end_frame - segment.start_frame + 1
        per_frame[segment.start_frame : segment.end_frame + 1] = log_likelihood([segment]) / frames
    return per_frame


def worst_window(values: np.ndarray, frames: int) -> tuple[float, float, int]:
    """The lowest sum of `frames` running values, how many times their spread (median absolute deviation, plus one)
    it lies under the median of all such sums, and where it starts."""
    sums = np.convolve(values, np.ones(frames), "valid") if len(values) > frames else np.array([values.sum()])
    at, median = int(sums.argmin()), float(np.median(sums))
    return float(sums[at]), float((sums[at] - median) / (np.median(np.abs(sums - median)) + 1.0)), at


class Aligner:
    """pocketsphinx's forced alignment of a piece's text to its audio: where each word is said, and whether the text is
    all that is said. Uncertain (a `problem`): the text cannot be aligned at all (a word not said, another sentence), a
    word aligned nowhere or squeezed to the fewest frames its phones allow (said elsewhere), or speech the text lacks:
    a word stretched over more speech than its phones take, or sound as loud as speech (QUIET_DB) for more than
    `max_silence` s where the aligner puts silence inside a piece, EDGE_SILENCE at its start or END_SILENCE at its end,
    which the speech detector cut tight. A text that aligns cleanly may still leave out a filler or a repeated word,
    or name a word said otherwise: `otherwise` says which (`said_otherwise`). Pauses and a piece's quiet margins are
    no problem. English, like its recogniser. A 3-state phone takes at least 3 frames: speech faster than FAST_PHONES
    phones a second (espeak-ng's 320 words a minute says 21-24) is aligned at 5 ms frames, where at 10 ms pocketsphinx
    aligned 13 of 36 such sentences."""

    FRAME = 0.01  # seconds: pocketsphinx's frame
    FAST_PHONES = 16.0  # phones a second of a piece (its text's, over its length): faster is aligned at FRAME / 2
    EDGE_SILENCE = 0.1  # seconds of speech-loud sound the aligner calls silence at a piece's start: a word ("the")
    # ...at its end: a last plosive's release ("cap") sounds up to 0.2 s past the word's end (espeak-ng's en-us-nyc:
    # 0.15-0.21 s); of 70 sentences lacking their last word, as many were caught at 0.25 s as at 0.1
    END_SILENCE = 0.25
    QUIET_DB = 30.0  # a frame this far under the piece's loud frames (its 95th percentile) is a pause
    SOUND_SECONDS = (
        2.0  # the longest a non-verbal sound of the text (a laugh) may sound where the aligner hears silence
    )
    SOUND_HEARD = 0.15  # seconds of sound under a non-verbal sound's filler: less, and its tag was not heard
    # a text of this many words that does not align at FRAME is aligned at FRAME / 2: one stretch of run-together
    # words in a long piece (quick turns) is enough to fail; a short text that fails is more often not what is said,
    # and a word or two more at a piece's end hide in its margins at 5 ms (a wrong text taken in a held-out set)
    RETRY_WORDS = 25
    # said_otherwise: a filler heard for FILLER_SECONDS, where the alignment fits FILLER_SHORTFALL (thousandths of a
    # log-likelihood) under the phone loop or puts FILLER_SILENCE s of its sound in a silence (clean sentences: -17 at
    # worst); a word fitting WORD_SHORTFALL under it (clean: -114 at worst, a word read otherwise: -100 to -300; at
    # 120 held-out voices' "houses" and "recipe" were dropped, and no more words read otherwise caught)
    FILLER_SECONDS, FILLER_SHORTFALL, FILLER_SILENCE, WORD_SHORTFALL = 0.15, 50.0, 0.06, 170.0
    # a word read otherwise whose shortfall the alignment spreads over its neighbours (it moves their edges and
    # squeezes the word): WINDOW_SECONDS of the words' audio fitting WINDOW_SHORTFALL under the loop (thousandths,
    # summed a 10 ms frame), or SPREAD_SECONDS of it WINDOW_SPREAD times the piece's own spread of such sums under
    # their median. On 165 clean pieces of 1 and 3 sentences (five voices) the worst were -123 and -8.4; of 68 with a
    # word read otherwise that the word's own shortfall missed, 31 fall past these
    WINDOW_SECONDS, WINDOW_SHORTFALL, SPREAD_SECONDS, WINDOW_SPREAD = 0.4, 140.0, 0.3, 10.0
    # seconds: a filler heard for less is no filler (flite's "uh": 0.12 s); a repeat, FILLER_SECONDS
    FILLER_HEARD = 0.1
    # a filler or repeat the grammar hears where the decoding with it fits FILLER_GAIN better (acoustic log-likelihood,
    # summed a 10 ms frame) over it and FILLER_PAD s either side than the decoding of the text alone: the alignment
    # stretches the words around it over its sound and fits nearly as well, but not as well as this. On 165 clean
    # pieces of one and three sentences (five voices) the most was 25.6; of 165 each with a filler or a repeat in
    # their middle, 22 and 19 more are caught than the checks below caught (97 and 80 in all)
    FILLER_GAIN, FILLER_PAD = 40.0, 0.2
    # a word of a closed class heard as another of it where that decoding fits SWAP_GAIN better (as FILLER_GAIN). On
    # 144 right sentences (eight voices) another member gained 11 at most; of 144 with one read for another, 23 more
    # were caught (104); on 128 other sentences and voices, none right and 30 more of 128 read otherwise
    SWAP_GAIN = 30.0
    # seconds of speech-loud sound in a "-teen"'s last phone, its "n", where the alignment puts it: less, and the
    # word was said as its "-ty" (said "-teen" where no next word takes its "n", RUNS_ON: 0.05-0.17 s in 504
    # sentences of six voices, under 0.04 in some of espeak-ng en-us+f3's at a sentence's end; said "-ty": 0-0.04 s
    # from espeak-ng, up to 0.14 from flite, whose "-ty" vowel runs on)
    TEEN_N = 0.04
    STRETCH = 0.25  # seconds of speech a phone: twice the longest of 1,032 words aligned right (espeak-ng's voices)
    # seconds of quiet inside one sound (a stop's closure): "Perfect." after a turn, 0.22 and 0.11 s of sound
    # either side of a 0.11 s closure, was two sounds each under END_SILENCE; its clip was kept without it
    CLOSURE = 0.15

    def __init__(self, max_silence: float):
        from pocketsphinx import Decoder

        self.decoder, self.max_silence, self.decoders, self.loops = Decoder, max_silence, {}, {}

    def decoder_at(self, frame: float):
        """One decoder a frame length, made once (alignment needs no language model), its features reset for each
        piece: a used decoder's adapt (CMN), so an alignment would depend on the pieces aligned before. The search's
        own path, not a lattice's best (`bestpath`), which ended 3 of 120 clean sentences before their last word."""
        if frame not in self.decoders:
            self.decoders[frame] = self.decoder(loglevel="FATAL", lm=None, frate=round(1 / frame), bestpath=False)
        self.decoders[frame].reinit_feat()
        return self.decoders[frame]

    def free_loop(self, pcm: bytes, frame: float) -> np.ndarray:
        """The acoustic log-likelihood of each frame of the audio under a free phone loop (pocketsphinx's English
        phones and their bigrams; a phone's spread over its frames): the right text's alignment scores about as much,
        another text's less, and a word said otherwise less than its neighbours. Kept for the piece whose parts are
        tried in turn."""
        digest = (frame, hashlib.sha256(pcm).hexdigest())
        if digest not in self.loops:
            from pocketsphinx import get_model_path

            if ("loop", frame) not in self.decoders:
                phones = f"{get_model_path()}/en-us-phone.lm.bin"
                self.decoders["loop", frame] = self.decoder(loglevel="FATAL", lm=None, allphone=phones,
                                                            frate=round(1 / frame))  # fmt: skip
            loop = self.decoders["loop", frame]
            loop.reinit_feat()
            loop.start_utt()
            loop.process_raw(pcm, full_utt=True)
            loop.end_utt()
            per_frame = frame_log_likelihoods(loop.seg() or [], pcm, frame)
            self.loops = {key: value for key, value in self.loops.items() if key[1] == digest[1]}
            self.loops[digest] = per_frame
        return self.loops[digest]

    @staticmethod
    def shortfalls(segments, loop: np.ndarray) -> np.ndarray:
        """How far the alignment falls under the phone loop at each frame, past how far the piece's words fall a
        frame (a voice unlike the acoustic model's falls under it throughout), in thousandths of a log-likelihood (a
        segment's spread over its frames): a word said otherwise ("blue" for "green") falls 0.15-0.3 under over its
        frames; the worst word of a right text, 0.01-0.11."""
        under, worded = np.zeros(len(loop)), []
        for segment in segments:
            span = slice(segment.start_frame, segment.end_frame + 1)
            under[span] = log_likelihood([segment]) / (segment.end_frame - segment.start_frame + 1) - loop[span]
            if not segment.word.startswith(("<", "[")):
                worded.append(under[span].mean())
        return 1000 * (under - (float(np.median(worded)) if worded else 0.0))

    def unwritten(self, frame: float, words: list[str], given: dict, pcm: bytes) -> list[tuple[str, int, int, float]]:
        """Words said that the text lacks: the audio decoded with a grammar of the text that lets a filler ("um",
        "uh") or a repeated word in between its words: (word, first frame, last frame, how much better that decoding
        fits around it than the text's alone, as FILLER_GAIN measures it) each."""
        if not all(GRAMMAR_WORD.match(word) for word in words):  # a word JSGF cannot hold unquoted (no quoting)
            return []
        fillers = " | ".join(FILLERS)
        # none before the first word or after the last: a final consonant's release was heard as "um", and one there
        # is in EDGE_SILENCE or END_SILENCE
        body = " ".join(f"{word} [<filler> | {word}]" for word in words[:-1]) + f" {words[-1]}"
        decoder = self.grammar_decoding(frame, words, given, pcm, f"<filler> = {fillers};\npublic <text> = {body};")
        if decoder is None or decoder.hyp() is None:
            return []
        segments, expected, extra = list(decoder.seg()), 0, []  # read now: the next decoding reuses the decoder
        for segment in segments:
            word = segment.word.split("(")[0]
            if word.startswith(("<", "[")):
                continue
            if expected < len(words) and word == words[expected]:
                expected += 1
            else:
                extra.append(segment)
        if not extra:  # the text alone is decoded only where there is something to weigh against it
            return []
        alone = self.grammar_decoding(frame, words, given, pcm, f"public <text> = {' '.join(words)};")
        if alone is None or alone.hyp() is None:
            return []
        fits = frame_log_likelihoods(segments, pcm, frame) - frame_log_likelihoods(alone.seg(), pcm, frame)
        gain = fits * (frame / self.FRAME)
        pad = round(self.FILLER_PAD / frame)
        return [
            (
                s.word.split("(")[0],
                s.start_frame,
                s.end_frame,
                float(gain[max(s.start_frame - pad, 0) : s.end_frame + pad + 1].sum()),
            )
            for s in extra
        ]

    def said_otherwise(
        self, segments, words: list[str], given: dict, pcm: bytes, frame: float, loud, runs_on: list
    ) -> tuple | None:
        """What a text that aligns cleanly leaves out or names otherwise: a filler or repeated word heard (`unwritten`)
        over FILLER_SILENCE s of sound that the alignment puts in a silence ("walked, um, slowly"), or over
        FILLER_SECONDS of sound it fits FILLER_SHORTFALL under the phone loop (a word stretched over it); or a word
        (or silence) whose alignment falls WORD_SHORTFALL under the loop (`shortfalls`), or a stretch of the words
        that does (WINDOW_SECONDS, SPREAD_SECONDS); or a number word said as the one like it (`heard_as`). On 100
        clean sentences (five voices) none; of 100 each with a filler, a repeated word or a word read otherwise, 48,
        66 and 38 with this or a `problem` before the stretch was judged. (why, the word said otherwise or None), or
        None."""
        loop = self.free_loop(pcm, frame)
        under = self.shortfalls(segments, loop)
        silent = np.zeros(len(loud), bool)
        for segment in segments:
            silent[segment.start_frame : segment.end_frame + 1] = segment.word == "<sil>"
        for said, first, last, gain in [] if SOUND in words else self.unwritten(frame, words, given, pcm):
            span, heard, at = slice(first, last + 1), (last - first + 1) * frame, first * frame
            if gain > self.FILLER_GAIN:
                return (
                    f"speech the text lacks ('{said}' heard for {heard:.2f} s at {at:.2f} s, {gain:.0f} likelier)",
                    None,
                )
            # an "m" at a comma ("Almost, I") was heard as "um" for 0.09 s, "copy the whole" as "the the" for 0.13 s
            if heard < (self.FILLER_HEARD if said in FILLERS else self.FILLER_SECONDS):
                continue
            if (loud & silent)[span].sum() * frame >= self.FILLER_SILENCE or (
                loud[span].sum() * frame > self.FILLER_SECONDS and under[span].sum() < -self.FILLER_SHORTFALL
            ):
                return f"speech the text lacks ('{said}' heard for {heard:.2f} s at {at:.2f} s)", None
        shortfall, word, at = min(  # a tag's sound (a laugh) or a noise is judged by `silences`
            (
                (
                    under[segment.start_frame : segment.end_frame + 1].sum(),
                    segment.word.split("(")[0],
                    segment.start_frame,
                )
                for segment in segments
                if not segment.word.startswith("[")
            ),
            default=(0.0, None, 0),
        )
        if shortfall < -self.WORD_SHORTFALL:
            if word == "<sil>":
                return (
                    f"speech the text lacks (a silence at {at * frame:.2f} s fits {shortfall / 1000:.2f} under)",
                    None,
                )
            return f"'{as_written(word)}' said otherwise ({shortfall / 1000:.2f} under the phones heard)", word
        worded = [segment for segment in segments if not segment.word.startswith(("<", "["))] or segments
        begin, spoken = worded[0].start_frame, under.copy()
        for segment in segments:
            if segment.word.startswith("["):  # a tag's sound (a laugh) or a noise: judged by `silences`
                spoken[segment.start_frame : segment.end_frame + 1] = 0.0
        per_10ms = spoken[begin : worded[-1].end_frame + 1] * (frame / self.FRAME)
        lowest, _, lowest_at = worst_window(per_10ms, round(self.WINDOW_SECONDS / frame))
        _, spreads, spreads_at = worst_window(per_10ms, round(self.SPREAD_SECONDS / frame))
        if lowest < -self.WINDOW_SHORTFALL:
            seconds, at, measure = self.WINDOW_SECONDS, lowest_at, f"{-lowest / 1000:.2f} under the phones heard"
        elif spreads < -self.WINDOW_SPREAD:
            seconds, at, measure = self.SPREAD_SECONDS, spreads_at, f"{-spreads:.1f} spreads under the piece's median"
        else:
            seconds = None
        if seconds is not None:  # named by the word the stretch holds most of
            first, last = begin + at, begin + at + round(seconds / frame)
            word = max(worded, key=lambda s: min(s.end_frame + 1, last) - max(s.start_frame, first)).word.split("(")[0]
            return f"'{as_written(word)}' said otherwise (the {seconds:.1f} s around it: {measure})", word
        for word, other in itertools.chain(
            self.heard_as(segments, words, given, pcm, frame, loud, runs_on),
            self.swapped(segments, words, given, pcm, frame),
        ):
            return f"'{as_written(word)}' said as '{other}'", word
        return None

    def heard_as(self, segments, words: list[str], given: dict, pcm: bytes, frame: float, loud, runs_on: list):
        """Each number word the text says that was said as the one like it (LIKE_SOUNDING: "fifteen" read "fifty",
        "1918" read "nineteen eighty"), (word, what was said): its words as aligned (a written number's reading the
        alignment took) and a word either side, decoded with a grammar that holds either ("ninety" before "eight"
        has no "-teen" to be); a "-teen" heard as "-ty" only where its "n", which "-ty" lacks, holds under TEEN_N s
        of sound (squeezed to its fewest frames, or stretched over the pause after a sentence), and not before a
        word that starts with a vowel, a nasal or an approximant (RUNS_ON), where a said "n" is as short (before a
        vowel, 0.03 s in 26 of 36 right sentences) and the grammar heard 28 of 84 right ones as "-ty": there each
        one is put in `runs_on` with what the grammar heard ([word, the "-ty" or None]) for the recording to judge
        (judge_taken), unless a number's next part follows (COMPOUND: "nineteen ninety"). A neighbour across a
        non-verbal sound, or one JSGF cannot hold ("r1/2"), is left out of the grammar."""
        decoder = self.decoders.get(frame)
        for word, reading, before, after, first, window in self.word_windows(segments, words, pcm, frame):
            if reading is None or not any(part in LIKE_SOUNDING for part in reading.split()):
                continue
            parts = reading.split()
            for number, part in enumerate(parts):
                following = (parts[number + 1 :] or after)[:1]
                if part not in LIKE_SOUNDING or (part.endswith("y") and set(following) & UNITS):
                    continue
                other = " ".join([*parts[:number], LIKE_SOUNDING[part], *parts[number + 1 :]])
                rule = f"public <choice> = {' '.join(before)} ({reading} | {other}) {' '.join(after)};"
                heard = self.decoded(frame, before + parts + after, given, window, rule)[len(before) :]
                said_other = heard[: len(parts)] == other.split()  # where the word is: "nineteen ninety" holds both
                if (
                    part in TEENS
                    and following
                    and decoder
                    and (decoder.lookup_word(following[0]) or "").startswith(RUNS_ON)
                ):  # its "n" starts the next word ("fourteen Elm"), as short as none: judged by the recording,
                    if following[0] not in COMPOUND:  # not as a number's first part ("ninety ninety" is no year)
                        runs_on.append([word, other if said_other else None])
                    continue
                if not said_other:
                    continue
                if part in TEENS:  # its "n" as the phone alignment puts it: a said "-ty" leaves it little sound
                    span = self.last_n(frame, before + parts + after, len(before) + number, given, window)
                    if span is None or loud[first + span[0] : first + span[0] + span[1]].sum() * frame >= self.TEEN_N:
                        continue
                yield word, other
                break

    def word_windows(self, segments, words: list[str], pcm: bytes, frame: float):
        """Each word of the text with its reading (a written form's, by the pronunciation aligned), the words either
        side that a grammar holds (JSGF cannot hold "r1/2"; none across a non-verbal sound), the window's first frame
        and its audio: the aligned words, 0.15 s past a piece's ends. None where the alignment's words are not the
        text's."""
        said = [segment for segment in segments if not segment.word.startswith(("<", "["))]
        written = [word for word in words if word != SOUND]
        if len(said) != len(written):
            return
        tag_after, count = set(), 0
        for word in words:
            if word == SOUND:
                tag_after.add(count - 1)  # after the written word before it
            else:
                count += 1
        margin, size, decoder = round(0.15 / frame), round(frame * RATE) * 2, self.decoders.get(frame)
        for at, word in enumerate(written):
            reading = word if word not in SAID_READINGS else None
            if reading is None and decoder:
                reading = reading_of(word, decoder.lookup_word(said[at].word))
            before = [written[at - 1]] if at and at - 1 not in tag_after else []
            after = written[at + 1 : at + 2] if at not in tag_after else []
            before, after = ([word for word in side if GRAMMAR_WORD.match(word)] for side in (before, after))
            first = max(said[at - len(before)].start_frame - (margin if at == 0 or before else 0), 0)
            last = said[at + len(after)].end_frame + (margin if at == len(said) - 1 or after else 0)
            yield word, reading, before, after, first, pcm[first * size : (last + 1) * size]

    def swapped(self, segments, words: list[str], given: dict, pcm: bytes, frame: float):
        """Each word of a closed class (CLASS_OF: a weekday, a month, a number word, an ordinal) said as another of
        its class ("Thursday" read "Tuesday", "seventeen" read "seven", "24" read "twenty five"), (word, what was
        said): its reading and a word either side (`word_windows`) decoded with a grammar that holds each other
        member in its place (the like-sounding "-teen" or "-ty" is `heard_as`'s), where that decoding fits the
        window SWAP_GAIN better than the text's own, or the text's own does not decode there. Of a number of several
        words, only its units: the grammar heard a year's right "nineteen sixty" as "nineteen nineteen" (246 better)
        and "eighteen ninety" as "eleven ninety"."""
        for word, reading, before, after, _, window in self.word_windows(segments, words, pcm, frame):
            parts = (reading or "").split()
            for number, part in enumerate(parts):
                members = [m for m in CLASS_OF.get(part, ()) if m != part and m != LIKE_SOUNDING.get(part)]
                beside = [*(parts[number - 1 : number] or before[-1:]), *(parts[number + 1 : number + 2] or after[:1])]
                if not members or (part not in UNITS and set(beside) & set(CLASS_OF["one"])):
                    continue  # a number's "-teen" or "-ty" runs into the next part ("nineteen sixty"): its units only
                choice = f"({' | '.join([part, *members])})"
                text = [*before, *parts, *after]
                rule = " ".join([*before, *parts[:number], choice, *parts[number + 1 :], *after])
                decoder = self.grammar_decoding(frame, text + members, given, window, f"public <choice> = {rule};")
                heard = decoder.hyp().hypstr.split() if decoder is not None and decoder.hyp() is not None else []
                if len(heard) != len(text) or heard[len(before) + number] == part:
                    continue
                fits = frame_log_likelihoods(decoder.seg(), window, frame)  # read now: the next decoding reuses it
                alone = self.grammar_decoding(frame, text, given, window, f"public <text> = {' '.join(text)};")
                if alone is not None and alone.hyp() is not None:
                    gain = (fits - frame_log_likelihoods(alone.seg(), window, frame)).sum() * (frame / self.FRAME)
                    if gain <= self.SWAP_GAIN:
                        continue
                yield word, " ".join(heard[len(before) : len(before) + len(parts)])
                break

    def decoded(self, frame: float, words: list[str], given: dict, pcm: bytes, rule: str) -> list[str]:
        """The words a JSGF `rule` over `words` decodes `pcm` as."""
        decoder = self.grammar_decoding(frame, words, given, pcm, rule)
        return decoder.hyp().hypstr.split() if decoder is not None and decoder.hyp() is not None else []

    def grammar_decoding(self, frame: float, words: list[str], given: dict, pcm: bytes, rules: str):
        """The grammar decoder once it decoded `pcm` with JSGF `rules` over `words` (its hyp() and seg()); None
        where it refuses them."""
        key = ("grammar", frame)
        if key not in self.decoders:
            self.decoders[key] = self.decoder(loglevel="FATAL", lm=None, frate=round(1 / frame))
        decoder = self.decoders[key]
        unknown_words(decoder, words, given)
        try:
            decoder.add_jsgf_string("text", f"#JSGF V1.0;\ngrammar text;\n{rules}\n".encode())
            decoder.activate_search("text")
            decoder.reinit_feat()
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
        except (RuntimeError, ValueError):  # ValueError: a grammar it cannot parse
            self.decoders.pop(key)
            return None
        return decoder

    def last_n(self, frame: float, words: list[str], at: int, given: dict, pcm: bytes) -> tuple[int, int] | None:
        """The first frame and the frames of the last "n" of `words[at]` (a "-teen"'s, "-teenth"'s) in `words`'
        phone-level alignment to `pcm` (a second pass over the word alignment); None where it does not align."""
        key = ("phones", frame)
        if key not in self.decoders:
            self.decoders[key] = self.decoder(loglevel="FATAL", lm=None, frate=round(1 / frame), bestpath=False)
        decoder = self.decoders[key]
        unknown_words(decoder, words, given)
        try:
            decoder.set_align_text(" ".join(words))
            for second in (False, True):
                if second:
                    decoder.set_alignment()
                decoder.reinit_feat()
                decoder.start_utt()
                decoder.process_raw(pcm, full_utt=True)
                decoder.end_utt()
        except RuntimeError:
            self.decoders.pop(key)
            return None
        alignment = decoder.get_alignment()  # held: its words are views into it
        spans = [
            [(phone.start, phone.duration) for phone in word if phone.name == "N"][-1:]
            for word in alignment.words()
            if not word.name.startswith(("<", "["))
        ]
        return spans[at][0] if len(spans) == len(words) and spans[at] else None

    def aligned(self, decoder, frame: float, words: list[str], pcm: bytes) -> list | str:
        """The decoder's segments of `words` forced onto `pcm`: none where they do not align, the decoder's error
        where it refuses them."""
        try:
            decoder.set_align_text(" ".join(words))
            decoder.start_utt()
            decoder.process_raw(pcm, full_utt=True)
            decoder.end_utt()
        except Exception as error:
            self.decoders.pop(frame)  # one left mid-utterance would refuse every later piece
            if not isinstance(error, RuntimeError):
                raise
            return str(error)
        return list(decoder.seg() or []) if decoder.hyp() is not None else []

    def silences(self, segments, loud, frame: float, sounds: int) -> tuple[dict[int, int], dict[int, float], int]:
        """The alignment's silences and the text's `sounds` non-verbal tags: the runs of silences (`silence_runs`:
        the aligner split a reply after a sentence, "Deal.", 0.5 s of sound, over two, each under END_SILENCE), the
        seconds of sound each run holds that no tag explains (its longest stretch of loud frames), and how many tags
        were heard. A tag's sound is the longest sound of a run around its filler, up to SOUND_SECONDS a sound, the
        longest first (pocketsphinx's filler models hear a laugh as silence as often as as a sound); the run's other
        sound is still judged (a reply after a laugh), and a silence elsewhere is no tag's (a "(sighs)" with no sigh
        took the words said after its part, "then. Thank you."); a laugh over SOUND_SECONDS is speech the text lacks.
        A tag is heard where its run, or its filler outside one explained, holds SOUND_HEARD s of sound."""
        ends = silence_runs(segments)
        spans = {
            first: loud[segments[first].start_frame : segments[last].end_frame + 1] for first, last in ends.items()
        }
        runs_of = {first: sorted(flag_runs(span, round(0.1 / frame))) for first, span in spans.items()}
        sounding_of = {first: frame * max(runs, default=0) for first, runs in runs_of.items()}
        budget, forgiven = self.SOUND_SECONDS * sounds, set()
        holds = {
            first for first, last in ends.items() if any(segments[n].word == SOUND for n in range(first, last + 1))
        }
        for sounding, number in sorted(((s, n) for n, s in sounding_of.items() if s and n in holds), reverse=True):
            if sounding <= budget:
                budget -= sounding
                forgiven.add(number)
        judged = {  # a tag's run: its other sounds (a reply after a laugh); else its longest, over a stop's closure
            first: frame * max(runs[:-1], default=0)
            if first in forgiven
            else frame * max(flag_runs(spans[first], round(self.CLOSURE / frame)), default=0)
            for first, runs in runs_of.items()
        }
        explained = {number for first in forgiven for number in range(first, ends[first] + 1)}
        heard = sum(sounding_of[first] >= self.SOUND_HEARD for first in forgiven) + sum(
            loud[segment.start_frame : segment.end_frame + 1].sum() * frame >= self.SOUND_HEARD
            for number, segment in enumerate(segments)
            if segment.word == SOUND and number not in explained
        )
        return ends, judged, heard

    def __call__(self, audio: np.ndarray, rate: int, text: str, fine: bool = False) -> dict:
        """`text` as written: its spoken words (spoken.spoken) are aligned, a word the dictionary lacks with the
        pronunciation gruut gives it; a non-verbal tag as a sound. `fine`: at FRAME / 2, as a text whose only
        problem at FRAME is a squeezed word is aligned again (flite's "the" takes 0.06 s, 13 of 100 clean
        sentences)."""
        words, given = spoken_text(text).split(), pronunciations(text)
        if not words:
            return {"confidence": 0.0, "problem": "no words to align"}
        decoder = self.decoder_at(self.FRAME)
        unknown = unknown_words(decoder, words, given)
        if unknown:
            return {"confidence": 0.0, "problem": f"not in the aligner's dictionary: {' '.join(unknown[:3])}"}
        audio16k = to_model_rate(audio, rate)
        seconds, frame = max(len(audio16k) / RATE, self.FRAME), self.FRAME
        if fine or sum(phones(decoder, word) for word in words) / seconds > self.FAST_PHONES:
            frame, decoder = self.FRAME / 2, self.decoder_at(self.FRAME / 2)
            unknown_words(decoder, words, given)
        pcm = pcm16(audio16k).tobytes()
        segments = self.aligned(decoder, frame, words, pcm)
        if not segments and frame == self.FRAME and len(words) >= self.RETRY_WORDS:  # fast words somewhere in it
            frame, decoder = self.FRAME / 2, self.decoder_at(self.FRAME / 2)
            unknown_words(decoder, words, given)
            segments = self.aligned(decoder, frame, words, pcm)
        if isinstance(segments, str):
            return {"confidence": 0.0, "problem": f"not aligned ({segments})"}
        if not segments:
            return {"confidence": 0.0, "problem": "the text does not align with the audio"}
        loud = loud_frames(audio16k, round(frame * RATE), self.QUIET_DB)
        aligned = [segment.word.split("(")[0] for segment in segments if not segment.word.startswith(("<", "["))]
        missing = list((Counter(word for word in words if word != SOUND) - Counter(aligned)).elements())
        unexplained = 0.1 * len(missing)
        problems = [f"{' '.join(repr(as_written(word)) for word in missing[:3])} aligned nowhere"] if missing else []
        ends, judged, heard = self.silences(segments, loud, frame, words.count(SOUND))
        for number, segment in enumerate(segments):
            length = (segment.end_frame - segment.start_frame + 1) * frame
            # a piece of speech starts and ends in speech: a word there
            last = ends.get(number, number)
            edge = self.EDGE_SILENCE if number == 0 else self.END_SILENCE if last == len(segments) - 1 else None
            if number in ends:
                sounding = judged[number]
                if sounding > (edge if edge is not None else self.max_silence):
                    unexplained += sounding
                    at = segment.start_frame * frame
                    problems.append(f"speech the text lacks ({sounding:.2f} s in a silence at {at:.2f} s)")
            elif not segment.word.startswith(("<", "[")):
                count, word = phones(decoder, segment.word), segment.word.split("(")[0]
                sounding = loud[segment.start_frame : segment.end_frame + 1].sum() * frame
                if length <= 3 * count * frame:  # a 3-state HMM's fewest frames: squeezed in
                    unexplained += 0.1
                    problems.append(f"'{as_written(word)}' squeezed to {length:.2f} s")
                elif sounding > self.STRETCH * count + 0.25:  # a word stretched over others the text lacks
                    unexplained += sounding - self.STRETCH * count
                    problems.append(f"speech the text lacks ('{as_written(word)}' stretched over {sounding:.2f} s)")
        if (unheard := words.count(SOUND) - heard) > 0:  # a tag whose sound is not in the audio is not kept
            unexplained += 0.1 * unheard
            problems.append(f"{unheard} of its non-verbal sounds not heard")
        frames = max(len(audio16k) / (frame * RATE), 1.0)
        fit = 1000 * (log_likelihood(segments) - self.free_loop(pcm, frame).sum()) / frames
        # judged once the part is taken (judge_taken): a problem here would send the search to other parts
        runs_on = []  # each "-teen" before a sound its "n" runs into: [word, what the grammar heard it as, or None]
        otherwise = None if problems else self.said_otherwise(segments, words, given, pcm, frame, loud, runs_on)
        otherwise, otherwise_word = otherwise or (None, None)
        if frame == self.FRAME and problems and all("squeezed" in problem for problem in problems):
            finer = self(audio, rate, text, fine=True)
            if finer["problem"] is None:
                return finer
        confidence = round(max(0.0, 1.0 - float(unexplained) / seconds), 3)
        return {
            "confidence": confidence,
            "problem": "; ".join(problems) or None,
            "fit": round(fit, 3),
            "otherwise": otherwise,
            "otherwise_word": otherwise_word,
            "runs_on": runs_on,
        }
