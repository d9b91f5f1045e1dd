"""Text as written to what a reader says, for the aligner: numbers, money, dates, ordinals, times, abbreviations and
symbols in their spoken words (gruut's English normaliser), each word with a pronunciation in the aligner's phones
(CMU ARPAbet: gruut's lexicon, else its grapheme-to-phoneme model), so that a name or a word the aligner's
dictionary lacks is aligned instead of failing its piece. The kept text stays as written; only alignment uses this.

Dia's non-verbal tags (`(laughs)`, `(coughs)`, ...) are sounds, not words: each is aligned as a non-speech sound."""

import functools
import re

from tpu_demo.model.tokens import TEXT_TAGS

# Dia-1.6B's non-verbal tags (its model card); what is written between brackets otherwise is read as words
NON_VERBAL = (
    "laughs|clears throat|sighs|gasps|coughs|singing|sings|mumbles|beep|groans|sniffs|claps|screams|inhales|"
    "exhales|applause|burps|humming|sneezes|chuckle|whistles"
)
NON_VERBAL_TAG = re.compile(rf"\((?:{NON_VERBAL})\)", re.IGNORECASE)
TOKEN = re.compile(rf"{NON_VERBAL_TAG.pattern}\S*|\S+", re.IGNORECASE)  # a written token; a tag is one
SOUND = "[SPEECH]"  # pocketsphinx's filler for a speech-like sound (+SPN+): what a non-verbal tag aligns as
# a period that may end no sentence, which gruut reads: a title, a street, an initial ("J. K. Rowling"), "etc."
ABBREVIATION = re.compile(
    r"^(?:mr|mrs|ms|dr|prof|st|jr|sr|vs|etc|mt|ft|vol|fig|approx|dept|gen|capt|sgt|lt|col|gov|sen|rev|fr|supt|"
    r"mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec|hwy|rte|[a-z])\.$",
    re.I,
)
TITLE = re.compile(r"^(?:Mr|Mrs|Ms|Dr|Prof|St|Gen|Capt|Sgt|Lt|Col|Gov|Sen|Rev|Fr|Supt)\.$")  # before a name
INITIAL = re.compile(r"^[A-Z]\.$")
LETTERS = re.compile(r"^(?:[A-Za-z]\.){2,}$")  # letters with periods: "p.m.", "e.g.", "U.S."
# an abbreviation a number follows: "no. 1138", "fig. 3", "pp. 12-14"
BEFORE_A_NUMBER = re.compile(
    r"^(?:no|nos|nr|vol|vols|fig|figs|p|pp|ch|chap|sec|art|op|ext|apt|rm|ref|inv|pt)\.$", re.I
)


def before_a_name(word: str, previous: str, following: str) -> bool:
    """Whether a written word's period ends no sentence: a title before a name ("Dr. Okafor"), an initial inside a
    name ("J. K. Rowling"), or an abbreviation a number or a lower-case word follows ("no. 1138", "etc. and", "p.m.
    on"); "No." and "etc." before a capital, and "plan B.", end theirs."""
    if ABBREVIATION.match(word) or BEFORE_A_NUMBER.match(word) or LETTERS.match(word):
        if following[:1].isdigit() or following[:1].islower():
            return True
    if not following[:1].isupper():
        return False
    return bool(TITLE.match(word) or (INITIAL.match(word) and previous[:1].isupper()))


IPA_TO_ARPABET = {  # gruut's English phonemes (stress marks and lengths dropped) to CMU's
    "ɑ": "AA", "æ": "AE", "ʌ": "AH", "ə": "AH", "ɔ": "AO", "aʊ": "AW", "aɪ": "AY", "ɛ": "EH", "ɚ": "ER", "ɝ": "ER",
    "eɪ": "EY", "ɪ": "IH", "i": "IY", "oʊ": "OW", "ɔɪ": "OY", "ʊ": "UH", "u": "UW", "b": "B", "t͡ʃ": "CH", "d": "D",
    "ð": "DH", "f": "F", "ɡ": "G", "g": "G", "h": "HH", "d͡ʒ": "JH", "k": "K", "l": "L", "m": "M", "n": "N",
    "ŋ": "NG", "p": "P", "ɹ": "R", "r": "R", "s": "S", "ʃ": "SH", "t": "T", "θ": "TH", "v": "V", "w": "W", "j": "Y",
    "z": "Z", "ʒ": "ZH", "ɾ": "D", "ʔ": "T", "o": "OW", "e": "EY", "a": "AA", "ɐ": "AH", "ɒ": "AA", "ɜ": "ER",
    "l̩": "L", "n̩": "N", "m̩": "M", "ɫ": "L", "x": "K", "ᵻ": "IH", "ɬ": "L", "ɪ̈": "IH", "əl": "AH L",
}  # fmt: skip


ACRONYM = re.compile(r"^([\"'(\[]*)([A-Z]{3,})([^A-Za-z]*)$")  # NASA, FBI: a word, or spelled, as the dictionary says


@functools.cache
def dictionary() -> dict[str, str]:
    """The aligner's dictionary (pocketsphinx's CMU dictionary, in its wheel): each word's first pronunciation."""
    from pathlib import Path

    import pocketsphinx

    path = Path(pocketsphinx.__file__).parent / "model" / "en-us" / "cmudict-en-us.dict"
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        word, _, phones = line.partition(" ")
        found.setdefault(word, phones.strip())
    return found


def number_readings(number: int, written: str = "") -> list[str]:
    """The ways a reader says a whole number (as `written`, where a code's leading zeros count), the usual first:
    "one thousand two hundred" (and with "and"), "twelve hundred", in pairs ("nineteen ninety-nine", "six
    seventy-four"), digit by digit "one oh five" (a code's: "nine oh two one oh", "nine zero two one zero")."""
    from num2words import num2words

    def words(text: str) -> str:
        return " ".join(text.replace("-", " ").replace(",", " ").split())

    cardinal = words(num2words(number))
    readings = [cardinal.replace(" and ", " "), cardinal]
    if 1100 <= number <= 9999 and number // 100 % 10:  # "twelve hundred", "twelve hundred and fifty"
        hundreds, rest = words(num2words(number // 100)) + " hundred", words(num2words(number % 100))
        readings += [f"{hundreds} {rest}", f"{hundreds} and {rest}"] if number % 100 else [hundreds]
    # in pairs, as years and codes are read: "nineteen ninety-nine", "forty-one eighty-nine"
    if 1000 <= number <= 9999:
        readings.append(words(num2words(number, to="year")))
    if 100 <= number <= 999 and number % 100 >= 10:  # "six seventy-four"
        readings.append(f"{words(num2words(number // 100))} {words(num2words(number % 100))}")
    # "a hundred", "a thousand and twenty": said for its "one" as often
    readings += [f"a {reading[4:]}" for reading in readings if reading.startswith(("one hundred", "one thousand"))]
    written = written or str(number)
    if 100 <= number <= 9999 or len(written) >= 5 or written.startswith("0"):  # a code's first: "oh two one"
        spelled = [digits(written), digits(written, "zero")]
        readings = spelled + readings if written.startswith("0") else readings + spelled
    return list(dict.fromkeys(readings))


def said_as(name: str, readings) -> tuple[str, tuple[str, ...]] | None:
    """A written form as one word for the aligner (`name`), whose pronunciations are its `readings` that the
    dictionary holds every word of: the alignment takes the one said."""
    # a character a grammar word cannot hold ($, £, :, /) as its code: the checks for fillers and for a word read
    # as the one like it decode a grammar of the piece's words, and left out every piece with "$15" or "6:00"
    written, name = name[1:], name[0] + GRAMMAR_UNSAFE.sub(lambda found: f"x{ord(found.group()):x}", name[1:])
    variants = []
    for reading in readings:
        phones = [dictionary().get(word) for word in reading.split()]
        if all(phones):
            variants.append(" ".join(phones))
            SAID_READINGS.setdefault(name, {}).setdefault(" ".join(phones), reading)
    if not variants:
        return None
    WRITTEN[name] = written
    return name, tuple(dict.fromkeys(variants))


def cardinal(number: str) -> str:
    from num2words import num2words

    return " ".join(num2words(int(number)).replace("-", " ").replace(",", " ").replace(" and ", " ").split())


def digits(number: str, zero: str = "oh") -> str:
    return " ".join(zero if digit == "0" else cardinal(digit) for digit in number)


FRACTIONS = {2: ("half", "halves"), 4: ("quarter", "quarters")}


def fraction(top: str, bottom: str) -> list[str]:
    """3/4: "three quarters", "three fourths", "three over four"; 1/2: "one half", "a half", "half"."""
    from num2words import num2words

    a, b = int(top), int(bottom)
    if not 1 <= a < b <= 20:  # 24/7, 50/50: read apart
        return [f"{cardinal(top)} {cardinal(bottom)}"]
    ordinal = " ".join(num2words(b, to="ordinal").replace("-", " ").split())
    names = [FRACTIONS[b][a > 1]] if b in FRACTIONS else []
    names += [ordinal + "s" * (a > 1)] if b != 2 else []
    readings = [f"{cardinal(top)} {name}" for name in names] + [f"{cardinal(top)} over {cardinal(bottom)}"]
    return readings + ([f"a {names[0]}", names[0]] if a == 1 else [])


ROMAN = {"I": 1, "V": 5, "X": 10, "L": 50}
SAID_FOR = {  # an abbreviation before a number, as read; the written word is the other reading
    "no": "number", "nos": "numbers", "nr": "number", "vol": "volume", "fig": "figure", "p": "page", "pp": "pages",
    "ch": "chapter", "chap": "chapter", "sec": "section", "art": "article", "ext": "extension", "apt": "apartment",
    "rm": "room", "pt": "part",
}  # fmt: skip
LATIN = {"e.g.": ["for example", "e g"], "i.e.": ["that is", "i e"], "etc.": ["et cetera"], "vs.": ["versus"]}
# an address's abbreviation with its period, as read: where one is written two ways, the alignment takes the one
# said (gruut read "St. Paul" as "street Paul", "Elm Dr." as "Elm doctor", and left "Rd." and "Ave." unread)
STREETS = {"rd": ["road"], "ave": ["avenue"], "blvd": ["boulevard"], "ln": ["lane"], "st": ["street", "saint"],
           "dr": ["drive", "doctor"]}  # fmt: skip
# a weekday's, a month's or a road's abbreviation with its period, as read (gruut spelt "Thurs." and "Sept." out or
# read them as one syllable, and a held-out talk's clips with them dropped); the word as written is the other reading
SHORTENED = {
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday", "thur": "thursday",
    "thurs": "thursday", "fri": "friday", "sat": "saturday", "sun": "sunday", "jan": "january", "feb": "february",
    "mar": "march", "apr": "april", "jun": "june", "jul": "july", "aug": "august", "sep": "september",
    "sept": "september", "oct": "october", "nov": "november", "dec": "december", "hwy": "highway", "rte": "route",
}  # fmt: skip
MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
          "december"}  # fmt: skip
DAY = re.compile(r"^\d{1,2}$")
FORMS = [  # a written form gruut misreads, and how readers say it (a token without the punctuation around it)
    (re.compile(r"^(\d+)/(\d+)$"), lambda found: fraction(*found.groups())),
    # a phone number (555-0142, 555-123-4567): digit by digit, "oh" or "zero"
    (re.compile(r"^(?:\(?\d{3}\)?[-.]?)?\d{3}[-.]\d{4}$"),
     lambda found: [digits(re.sub(r"\D", "", found.group(0)), zero) for zero in ("oh", "zero")]),
    (re.compile(r"^(\d{1,4})[-–](\d{1,4})$"), lambda found: number_range(*found.groups())),  # 10-20, 1990-95
    (re.compile(r"^0\.(\d+)$"),  # 0.4: "zero point four", "nought point four" (spelt "naught"), "point four"
     lambda found: [f"{zero}point {digits(found.group(1))}" for zero in ("zero ", "naught ", "oh ", "")]),
    (re.compile(r"^(\d{1,3})\(([a-z])\)?$"), lambda found: [f"{digits(found.group(1))} {found.group(2)}"]),  # 401(k)
    (re.compile(r"^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$|^www\.[\w-]+(?:\.[\w-]+)+$", re.I),  # an e-mail or web address
     lambda found: address(found.group(0))),
    (re.compile(r"^([$£€])(\d+|\d{1,3}(?:,\d{3})+)\.(\d{2})$"), lambda found: money(*found.groups())),  # £1.20
    (re.compile(r"^([$£€])(\d+|\d{1,3}(?:,\d{3})+)$"), lambda found: whole_money(*found.groups())),  # £15, $1,200
    (re.compile(r"^(0?[1-9]|1\d|2[0-3]):00$"), lambda found: on_the_hour(int(found.group(1)))),  # 6:00, 14:00
    (re.compile(r"^(\d{1,2}):(\d{2}):(\d{2})$"),  # 1:02:33: "one oh two thirty three"
     lambda found: [" ".join([cardinal(found.group(1)), *(digits(part) if part[0] == "0" else cardinal(part)
                                                          for part in found.groups()[1:])])]),  # fmt: skip
]  # fmt: skip


def whole_money(currency: str, whole: str) -> list[str]:
    """£15: "fifteen pounds" (gruut: "fifteen pounds sterling"); $1,200 in its number's readings, "twelve hundred
    dollars" too; €20 "twenty euros" or "twenty euro"."""
    (one, many), _ = MONEY[currency]
    amount = whole.replace(",", "")
    spelled = {digits(amount), digits(amount, "zero")} if len(amount) > 1 else set()  # "five" is both for $5
    readings = [reading for reading in number_readings(int(amount), amount) if reading not in spelled]
    units = [one] if amount == "1" else [many, one] if currency == "€" else [many]
    return [f"{reading} {unit}" for reading in readings for unit in units] + ([f"a {one}"] if amount == "1" else [])


def on_the_hour(hour: int) -> list[str]:
    """6:00: "six o'clock" or "six" (gruut: "six" only); 14:00: "fourteen hundred", "fourteen hundred hours" or
    "fourteen"."""
    said = cardinal(str(hour))
    return [f"{said} o'clock", said] if hour <= 12 else [f"{said} hundred", f"{said} hundred hours", said]


def money(currency: str, whole: str, hundredths: str) -> list[str]:
    """£1.20: "one pound twenty pence", "one pound and twenty pence", "one pound twenty", "one point two oh pounds",
    "one twenty" (a price), "a pound twenty" (gruut: "one pound sterling twenty pence"); £0.20 "twenty pence"."""
    (one, many), (penny, pence) = MONEY[currency]
    whole = whole.replace(",", "")
    amount, small, major = cardinal(whole), cardinal(hundredths), one if whole == "1" else many
    minor = penny if hundredths == "01" else pence
    readings = [f"{amount} {major} {small} {minor}", f"{amount} {major} and {small} {minor}",
                f"{amount} {major} {small}", f"{amount} point {digits(hundredths)} {many}"]  # fmt: skip
    if hundredths != "00":  # a price: "three oh five", "twenty pence"
        cents = f"oh {small}" if hundredths[0] == "0" else small
        readings.append(f"{amount} {cents}" if int(whole) else f"{small} {minor}")
    # £1.20 "a pound twenty": said for its "one" as often
    return readings + [f"a {reading[4:]}" for reading in readings[:3] if whole == "1"]


def address(written: str) -> list[str]:
    """anna@example.com: "anna at example dot com"; www.example.org: "w w w dot example dot org"; a part the
    dictionary lacks as the two words it holds ("riversidecycling": "riverside cycling"), and spelled."""
    worded, spelled = [], []
    for part in re.split(r"([@.])", written.lower()):
        if part in "@.":
            worded.append({"@": "at", ".": "dot"}.get(part, ""))
            spelled.append(worded[-1])
        elif part in dictionary() and part != "www":
            worded.append(part)
            spelled.append(part)
        else:
            spelled.append(" ".join(part))
            worded.append(two_words(part) or spelled[-1])
    return list(dict.fromkeys(" ".join(" ".join(said).split()) for said in (worded, spelled)))


def two_words(written: str) -> str | None:
    """A run of letters as the two dictionary words it is made of ("riversidecycling"), the longest first; None."""
    for cut in range(len(written) - 3, 2, -1):  # parts of three letters or more: the dictionary holds "ng"
        if written[:cut] in dictionary() and written[cut:] in dictionary():
            return f"{written[:cut]} {written[cut:]}"
    return None


def number_range(first: str, last: str) -> list[str]:
    """10-20: "ten to twenty", "ten through twenty", "ten twenty"; each side in its readings (a year's too)."""
    sides = [number_readings(int(side), side)[:3] for side in (first, last)]
    return [f"{a} {word} {b}".replace("  ", " ") for word in ("to", "through", "") for a in sides[0] for b in sides[1]]


def a_month(token: str) -> bool:
    """Whether a written token names a month: "March", "Sept.", "Dec," (capitalised: "may" is a verb)."""
    bare = PUNCTUATION_AROUND.sub("", token).lower()
    return token[:1].isupper() and (
        bare in MONTHS or SHORTENED.get(bare) in MONTHS and token.rstrip(",;:").endswith(".")
    )


def said_form(token: str, previous: str, following: str = "") -> tuple[str, tuple[str, ...]] | None:
    """A written form `FORMS`, `LATIN` or `SAID_FOR` reads, a regnal number after a name ("Henry VIII": "the
    eighth"), a day beside a month ("March 3": "March third", "3 March": "the third of March"), as one word with its
    readings (`said_as`); None for any other token."""
    from num2words import num2words

    bare = PUNCTUATION_AROUND.sub("", token)
    if DAY.match(bare) and 1 <= int(bare) <= 31 and (a_month(previous) or a_month(following)):
        ordinal = " ".join(num2words(int(bare), to="ordinal").replace("-", " ").split())
        return said_as(f"r{bare}", [ordinal, f"the {ordinal}", f"the {ordinal} of", f"{ordinal} of", cardinal(bare)])
    if bare.lower() in TEMPERATURES:
        return said_as(f"r{bare.lower()}", TEMPERATURES[bare.lower()])
    if token.lower().rstrip(",;:") in LATIN:
        return said_as(f"r{token.lower()}", LATIN[token.lower().rstrip(",;:")])
    if token.rstrip(",;:!?").endswith(".") and bare.lower() in STREETS:  # after a name, a street's first
        readings = STREETS[bare.lower()]
        return said_as(f"r{bare.lower()}.", readings if previous[:1].isupper() else readings[::-1])
    if token.rstrip(",;:!?").endswith(".") and bare.lower() in SHORTENED:
        return said_as(f"r{bare.lower()}.", [SHORTENED[bare.lower()], bare.lower()])
    if BEFORE_A_NUMBER.match(token) and (word := token[:-1].lower()) in SAID_FOR:
        return said_as(f"r{word}", [SAID_FOR[word], word])
    for pattern, readings in FORMS:
        if found := pattern.match(bare):
            return said_as(f"r{bare}", readings(found))
    # "James I." or "Henry I," (a name's "I" before a sentence's end or a comma): the first, or the pronoun
    regnal = re.fullmatch(r"[IVXL]{2,}|V|X", bare) or bare == "I" and (token != bare or not following)
    if regnal and previous[:1].isupper() and (number := roman(bare) if bare != "I" else 1):
        ordinal = " ".join(num2words(number, to="ordinal").replace("-", " ").split())
        return said_as(f"r{bare}", [f"the {ordinal}", ordinal, cardinal(str(number)), " ".join(bare.lower())])
    return None


def roman(numeral: str) -> int | None:
    values = [ROMAN[letter] for letter in numeral]
    total = sum(-v if v < w else v for v, w in zip(values, [*values[1:], 0], strict=True))
    return total if 1 < total < 40 else None


def said_number(token: str) -> tuple[str, tuple[str, ...]] | None:
    """A whole number of 100 or more as written ("1,200", "105") as one word for the aligner (`n1200`), whose
    pronunciations are its readings (`number_readings`): the alignment takes the one said; None for any other token
    (a smaller number has one reading, gruut's)."""
    found = NUMBER.match(PUNCTUATION_AROUND.sub("", token))
    if not found:
        return None
    written = found.group(0).replace(",", "")
    if int(written) < 100 and not (written.startswith("0") and len(written) > 1):  # one reading: gruut's words
        return None
    return said_as(f"n{written}", number_readings(int(written), written))


def as_read(token: str) -> str:
    """An acronym the dictionary holds as a word, in lower case: read as the dictionary says ("NASA" a word, "FBI"
    spelled), where gruut would spell every one."""
    found = ACRONYM.match(token)
    if found and found.group(2).lower() in dictionary():
        return f"{found.group(1)}{found.group(2).lower()}{found.group(3)}"
    return token


UNITS = {  # after a number, as read (gruut reads numbers, not these); °C and °F stay, read as TEMPERATURES
    "kg": "kilograms", "g": "grams", "km": "kilometers", "m": "meters", "cm": "centimeters", "mm": "millimeters",
    "mph": "miles per hour", "lb": "pounds", "lbs": "pounds", "oz": "ounces", "ml": "milliliters", "l": "liters",
    "ft": "feet", "mi": "miles", "yd": "yards", "yds": "yards",
    "°c": "°c", "°f": "°f", "°": "degrees", "kb": "kilobytes", "mb": "megabytes", "gb": "gigabytes", "hz": "hertz",
    "khz": "kilohertz", "km²": "square kilometers", "m²": "square meters", "km³": "cubic kilometers",
    "m³": "cubic meters", "cm³": "cubic centimeters",
}  # fmt: skip
CURRENCIES = {"$": "dollars", "£": "pounds", "€": "euros"}
MONEY = {  # a currency's unit (one, many) and its hundredth (one, many)
    "$": (("dollar", "dollars"), ("cent", "cents")), "£": (("pound", "pounds"), ("penny", "pence")),
    "€": (("euro", "euros"), ("cent", "cents")),
}  # fmt: skip
TEMPERATURES = {  # a unit read as one word whose readings its pronunciations are (°C: often just "degrees")
    "°c": ["degrees celsius", "degrees", "degrees centigrade"], "°f": ["degrees fahrenheit", "degrees"],
}  # fmt: skip
TITLES = {  # before a name, as read (gruut reads Dr., Mr., Mrs., St.)
    "Prof": "Professor", "Gen": "General", "Capt": "Captain", "Sgt": "Sergeant", "Lt": "Lieutenant", "Col": "Colonel",
    "Gov": "Governor", "Sen": "Senator", "Rev": "Reverend", "Fr": "Father", "Supt": "Superintendent", "Ms": "Miz",
}  # fmt: skip
SYMBOLS = [  # written forms gruut leaves as they are, as a reader says them
    (re.compile(r"(?<=\d)\s*(" + "|".join(sorted(map(re.escape, UNITS), key=len, reverse=True)) + r")(?![\w²³])",
                re.I),
     lambda found: " " + UNITS[found.group(1).lower()]),
    (re.compile(r"\b(\d{2})(\d0)'?s\b"), lambda found: decade(found.group(1) + found.group(2))),  # the 1990s
    # "$1.2 billion": gruut reads "one dollar twenty cents billion"; a reader "one point two billion dollars"
    (re.compile(r"([$£€])\s?(\d+(?:[.,]\d+)?)\s+(thousand|million|billion|trillion)\b", re.I),
     lambda found: f"{found.group(2)} {found.group(3)} {CURRENCIES[found.group(1)]}"),
    (re.compile(r"(?<=\d)\s*([ap])\.?m\b\.?", re.I), lambda found: f" {found.group(1).upper()}M"),  # 7 pm: AM, spelled
    (re.compile(r"\b(" + "|".join(TITLES) + r")\.(?=\s)"), lambda found: TITLES[found.group(1)]),
    (re.compile(r"#(?=\d)"), lambda found: "number "),
    (re.compile(r"\s*&\s*"), lambda found: " and "),
    # a serial of letters and digits (51B, B2A23C, COVID19; not 3rd, 1990s): its runs of each, read apart
    (re.compile(r"\b(?!\d+(?:st|nd|rd|th|s)\b)(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z\d]+\b"),
     lambda found: " ".join(re.findall(r"\d+|[A-Za-z]+", found.group(0)))),
]  # fmt: skip
LARGE = {"hundred", "thousand", "million", "billion"}
NUMBER_WORDS = {
    "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen",
    "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "thirty", "forty", "fifty",
    "sixty", "seventy", "eighty", "ninety",
}  # fmt: skip
NUMBER = re.compile(r"^(?:\d{1,3}(?:,\d{3})+|\d{1,7})$")  # a whole number as written: 105, 1,200 (not 3.5, 3rd)
SAID_READINGS = {}  # a written form's word for the aligner: the reading each of its pronunciations says, usual first
WRITTEN = {}  # a written form's word for the aligner: the form as written
GRAMMAR_CHARACTERS = r"\w'.-"  # what a word of a JSGF grammar holds unquoted (pocketsphinx's: no quoting)
GRAMMAR_WORD = re.compile(rf"^[{GRAMMAR_CHARACTERS}]+$")
GRAMMAR_UNSAFE = re.compile(rf"[^{GRAMMAR_CHARACTERS}]")  # a character it cannot hold
PLAIN = re.compile(r"^[A-Za-z]+(?:'[A-Za-z]+)?$")
PUNCTUATION_AROUND = re.compile(r"^[\"'(\[¡¿]+|[.,!?;:\"')\]…]+$")
READ_AS_WORD = re.compile(r"^[a-z][a-z'.]*$")  # a word gruut's grapheme-to-phoneme model may pronounce


def decade(year: str) -> str:
    """ "1990" as "nineteen nineties"."""
    from num2words import num2words

    words = num2words(int(year), to="year").replace("-", " ").split()
    last = words[-1]
    words[-1] = f"{last[:-1]}ies" if last.endswith("y") else f"{last}s"
    return " ".join(words)


def readable(text: str) -> str:
    for pattern, replacement in SYMBOLS:
        text = pattern.sub(replacement, text)
    return text


def tokens(text: str) -> list[str]:
    """`text`'s written tokens: whitespace apart, a non-verbal tag (`(clears throat)`) one token."""
    return TOKEN.findall(text)


def is_sound(token: str) -> bool:
    return NON_VERBAL_TAG.match(token) is not None


def guesses(phones: str | None) -> tuple[str, ...]:
    return (phones,) if phones else ()


def arpabet(phonemes: list[str]) -> str | None:
    """gruut's IPA phonemes of a word as CMU phones; None if one has no CMU phone."""
    found = []
    for phoneme in phonemes:
        bare = phoneme.translate(str.maketrans("", "", "ˈˌːˑ"))
        if bare in ("", "|", "‖"):
            continue
        if bare not in IPA_TO_ARPABET:
            return None
        found.append(IPA_TO_ARPABET[bare])
    return " ".join(found) or None


@functools.lru_cache(maxsize=4096)
def espeak_pronunciation(word: str) -> str | None:
    """espeak-ng's reading of `word` in CMU phones, where espeak-ng is installed: a second guess at a name's
    pronunciation (gruut's model says "Eze" as "ease", espeak-ng as "ez"); None where it is not, or has no reading."""
    import shutil
    import subprocess

    program = shutil.which("espeak-ng")
    if not program or not READ_AS_WORD.match(word):
        return None
    try:
        found = subprocess.run([program, "-q", "-v", "en-us", "--ipa", "--sep=_", word], capture_output=True,
                               text=True, timeout=10, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return arpabet([phone for chunk in found.split() for phone in chunk.split("_")])


@functools.lru_cache(maxsize=65536)
def spoken(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The words a reader says for `text` as written, lower case, each with its pronunciations (ARPAbet: gruut's, a
    number's readings; none where the dictionary's is meant or gruut has none); a whole number is one word (`n1200`,
    `said_number`); a non-verbal tag is SOUND; speaker and language tags say nothing."""
    import gruut

    said, words = [], []

    def flush():
        plain = [plain_word(token) for token in words]
        if all(plain):  # words the dictionary holds, as they are: nothing for gruut to read (most of a script)
            said.extend((word, ()) for word in plain)
            words.clear()
        if words:
            line = " ".join(words)
            for sentence in gruut.sentences(line, lang="en-us", major_breaks=False, minor_breaks=False):
                for word in sentence:
                    if not (word.is_spoken and word.text.strip()):
                        continue
                    phonemes = word.phonemes or []
                    if len(word.text) == 1 and word.text.isalpha() and any("ˈ" in p for p in phonemes):
                        said.append((f"{word.text.lower()}.", guesses(arpabet(phonemes))))  # a letter by its name
                        continue
                    for part in word.text.lower().replace("-", " ").split():
                        whole = " " not in word.text.replace("-", " ") and READ_AS_WORD.match(part)
                        said.append((part, guesses(arpabet(phonemes) if whole else None)))
            words.clear()

    previous, written = "", tokens(readable(TEXT_TAGS.sub(" ", text)))
    for token, following in zip(written, [*written[1:], ""], strict=True):
        if is_sound(token):
            flush()
            said.append((SOUND, ()))
        elif form := said_form(token, previous, following) or said_number(token):
            flush()
            said.append(form)
        else:
            words.append(as_read(unaccented(token)))
        previous = token
    flush()
    return tuple(
        pair for number, pair in enumerate(said)
        if not (pair[0] == "and" and 0 < number < len(said) - 1 and said[number - 1][0] in LARGE
                and said[number + 1][0] in NUMBER_WORDS and not re.search(r"\band\b", text, re.I))
    )  # fmt: skip


def unaccented(token: str) -> str:
    """José as Jose, Søren as Soren: the dictionaries' spelling of a name (the kept text keeps its accents)."""
    import unicodedata

    folded = unicodedata.normalize("NFD", token.translate(FOLDED))
    return "".join(character for character in folded if not unicodedata.combining(character))


FOLDED = str.maketrans({"ø": "o", "Ø": "O", "æ": "ae", "Æ": "Ae", "ß": "ss", "ł": "l", "Ł": "L", "đ": "d", "œ": "oe"})


def plain_word(token: str) -> str | None:
    """`token` in lower case without the punctuation around it, where it is a word of the aligner's dictionary as
    written (no digits, symbols, abbreviations or acronyms); else None."""
    if ABBREVIATION.match(token):
        return None
    word = PUNCTUATION_AROUND.sub("", token)
    if not PLAIN.match(word) or (word.isupper() and len(word) > 1):
        return None
    return word.lower() if word.lower() in dictionary() else None


def reading_of(word: str, phones: str | None) -> str | None:
    """The words a written form's word for the aligner (`said_as`) says in its pronunciation `phones`."""
    return SAID_READINGS.get(word, {}).get(phones or "")


def as_written(word: str) -> str:
    """A word for the aligner as the text writes it: a written form's without its mark ("n1918": "1918")."""
    return WRITTEN.get(word, word)


def usual_reading(word: str) -> str | None:
    """A written form's word for the aligner's usual reading (its first), what its length is counted by."""
    return next(iter(SAID_READINGS.get(word, {}).values()), None)


def said_characters(word: str) -> int:
    """The characters a spoken word stands for: a number's usual reading's."""
    return len((usual_reading(word) or word).replace(" ", ""))


def spoken_text(text: str) -> str:
    """The words `spoken` says, as one line: what the aligner aligns."""
    return " ".join(word for word, _ in spoken(text))


def pronunciations(text: str) -> dict[str, list[str]]:
    """Each spoken word of `text` with the pronunciations gruut (its lexicon, else its model) and espeak-ng give it,
    for a word the aligner's dictionary lacks (the aligner takes the one the audio fits)."""
    found = {}
    for word, phones in spoken(text):
        if word not in dictionary():
            found[word] = list(dict.fromkeys([*phones, *filter(None, [espeak_pronunciation(word)])]))
    return {word: guesses for word, guesses in found.items() if guesses}
