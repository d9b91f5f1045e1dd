"""Transcripts as people write them (tpu_demo.segmenting.spoken, align): numbers, money, dates, ordinals, times,
titles, acronyms, units and names are aligned as they are said and kept as written; a piece that does not align
costs only itself, and the text is aligned in its order after it."""

import shutil

import pytest

from tests import planted_speech
from tests.finetune.test_segmenting import needs_speech_models, pieces, recording, segment_planted
from tests.testing_utils import require_dia

pytestmark = require_dia


@pytest.fixture
def gruut():
    return pytest.importorskip("gruut", reason="written forms are read by gruut: pip install '.[speech]'")


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("Dr. Okafor paid $42.50 on March 3rd, 2021.", "rdr. okafor paid rx2442.50 on march third n2021"),  # below
        ("Mr. Smith lives on Elm St. with 2 cats.", "mister smith lives on elm rst. with two cats"),
        ("About 5% of 1,200 voted.", "about five percent of n1200 voted"),
        ("Page 143.", "page n143"),  # one word, its readings its pronunciations (below)
        ("It raised $1.2 billion.", "it raised one point two billion dollars"),
        ("The 1990s, the FBI and NASA.", "the nineteen nineties the fbi and nasa"),  # the dictionary's acronyms
        ("The U.S. team at 7 pm.", "the u. s. team at seven p. m."),  # letters said by their names
        ("Prof. Nguyen: 3 classes & 2 labs, 5 kg, #1, 24/7.",
         "professor nguyen three classes and two labs five kilograms number one r24x2f7"),  # r24x2f7: below
        ("[S1] Well, (laughs) I see. [S2] (clears throat) Yes.", "well [SPEECH] i see [SPEECH] yes"),
        # a serial: its letters and digits read apart (a list of lockers was dropped whole, "51b" in no dictionary)
        ("Locker 51B, seat 14C, COVID19.", "locker fifty one b. seat fourteen c. c. o. v. i. d. nineteen"),
        ("José, Zoë and Søren.", "jose zoe and soren"),  # a name as the dictionaries spell it
        ("It drops 90 ft to Hwy. 12 by Sept. 19th.", "it drops ninety feet to rhwy. twelve by rsept. nineteenth"),
    ],
)  # fmt: skip
def test_written_forms_are_aligned_as_they_are_said(gruut, written, said):
    from tpu_demo.segmenting.spoken import spoken_text

    assert spoken_text(written) == said


def test_money_and_temperatures_are_one_word_whose_pronunciations_are_their_readings(gruut):
    # gruut read "£1.20" as "one pound sterling twenty pence", and "180°C" as "one hundred eighty degrees": a reader
    # saying "one pound twenty" or "degrees Celsius" had the clip dropped
    from tpu_demo.segmenting.spoken import pronunciations, spoken_text, usual_reading

    assert spoken_text("A stamp costs £1.20, a coffee $3.05 and a cake €1.50.") == (
        "a stamp costs rxa31.20 a coffee rx243.05 and a cake rx20ac1.50"
    )
    found = pronunciations("£1.20 $3.05 €1.50")
    assert len(found["rxa31.20"]) == 8 and len(found["rx243.05"]) == 5  # "a pound twenty", "three oh five" too
    assert usual_reading("rxa31.20") == "one pound twenty pence"
    assert spoken_text("Set the oven to 180°C, or 350 °F, with 2 L of water.") == (
        "set the oven to n180 rxb0c or n350 rxb0f with two liters of water"
    )
    assert len(pronunciations("180°C")["rxb0c"]) == 3 and len(pronunciations("350 °F")["rxb0f"]) == 2


def test_a_number_is_one_word_whose_pronunciations_are_its_readings(gruut):
    from tpu_demo.segmenting.spoken import number_readings, pronunciations

    assert number_readings(1200) == [
        "one thousand two hundred",
        "twelve hundred",
        "a thousand two hundred",
        "one two oh oh",
        "one two zero zero",
    ]
    assert number_readings(105)[:3] == ["one hundred five", "one hundred and five", "a hundred five"]
    assert number_readings(1250)[:4] == [  # "twelve hundred and fifty" as often as "one thousand ..."
        "one thousand two hundred fifty", "one thousand two hundred and fifty", "twelve hundred fifty",
        "twelve hundred and fifty",
    ]  # fmt: skip
    assert not [reading for reading in number_readings(2050) if "twenty hundred" in reading]
    assert number_readings(2134, "02134")[:2] == ["oh two one three four", "zero two one three four"]  # a code
    assert "nineteen ninety nine" in number_readings(1999)
    assert "forty one eighty nine" in number_readings(4189) and "six seventy four" in number_readings(674)  # codes
    assert len(pronunciations("Flight 105.")["n105"]) == 6  # each reading in the dictionary's phones ("a hundred")


@pytest.mark.parametrize(
    ("written", "readings"),
    [
        ("1/2", ["one half", "one over two", "a half", "half"]),
        ("3/4", ["three quarters", "three fourths", "three over four"]),
        ("24/7", ["twenty four seven"]),
        ("555-0142", ["five five five oh one four two", "five five five zero one four two"]),
        ("10-20", ["ten to twenty", "ten through twenty", "ten twenty"]),
        ("e.g.", ["for example", "e g"]),
        ("no.", ["number", "no"]),
        ("1:02:33", ["one oh two thirty three"]),
        ("6:00", ["six o'clock", "six"]),
        ("£15", ["fifteen pounds"]),
        ("$5", ["five dollars"]),
        ("£1", ["one pound", "a pound"]),
        ("$1.75", ["one dollar seventy five cents", "one dollar and seventy five cents", "one dollar seventy five",
                   "one point seven five dollars", "one seventy five", "a dollar seventy five cents",
                   "a dollar and seventy five cents", "a dollar seventy five"]),  # a held-out talk's was dropped
        ("$12.50", ["twelve dollars fifty cents", "twelve dollars and fifty cents", "twelve dollars fifty",
                    "twelve point five oh dollars", "twelve fifty"]),  # a price read without its unit
        ("$0.50", ["zero dollars fifty cents", "zero dollars and fifty cents", "zero dollars fifty",
                   "zero point five oh dollars", "fifty cents"]),
        ("$100", ["one hundred dollars", "a hundred dollars"]),
        ("$1,200", ["one thousand two hundred dollars", "twelve hundred dollars", "a thousand two hundred dollars"]),
        ("€20", ["twenty euros", "twenty euro"]),
        ("Rd.,", ["road"]),
        ("St.", ["saint", "street"]),  # before a name; after one ("Baker St."), a street's first
        ("Dr.", ["doctor", "drive"]),
        ("14:00", ["fourteen hundred", "fourteen hundred hours", "fourteen"]),
        ("anna@example.com", ["anna at example dot com"]),
        ("www.example.org", ["w w w dot example dot org"]),
        ("www.riversidecycling.org",
         ["w w w dot riverside cycling dot org", "w w w dot r i v e r s i d e c y c l i n g dot org"]),
        ("0.4", ["zero point four", "naught point four", "oh point four", "point four"]),  # "nought" as spelt there
        ("401(k)", ["four oh one k"]),
        ("Thurs.,", ["thursday"]),  # gruut spelt it out; "thurs" is no word
        ("Sept.", ["september", "sept"]),
        ("Jan.", ["january", "jan"]),  # a name at a sentence's end, too
        ("Hwy.", ["highway"]),
    ],
)  # fmt: skip
def test_a_written_form_is_one_word_whose_pronunciations_are_its_readings(gruut, written, readings):
    from tpu_demo.segmenting.spoken import dictionary, said_form

    word, phones = said_form(written, "")
    expected = [" ".join(dictionary()[part] for part in reading.split()) for reading in readings]
    assert list(phones) == expected, word


@pytest.mark.parametrize(
    ("written", "previous", "following"), [("3,", "March", "1987"), ("9", "Sept.", ""), ("3", "", "March")]
)
def test_a_day_beside_a_month_is_read_as_its_ordinal_or_its_number(gruut, written, previous, following):
    # flite read "March 3, 1987" as "March third, nineteen eighty seven": gruut's "three" dropped a clean sentence
    from tpu_demo.segmenting.spoken import dictionary, said_form

    day = {"3": ("third", "three"), "9": ("ninth", "nine")}[written.rstrip(",")]
    readings = [day[0], f"the {day[0]}", f"the {day[0]} of", f"{day[0]} of", day[1]]
    word, phones = said_form(written, previous, following)
    assert list(phones) == [" ".join(dictionary()[part] for part in reading.split()) for reading in readings], word
    assert said_form("3", "may", "") is None and said_form("3", "", "dogs") is None  # a verb, no month
    assert said_form("42", "March", "") is None  # no day of a month


def test_a_regnal_number_follows_a_name_and_a_lone_i_is_a_word(gruut):
    from tpu_demo.segmenting.spoken import spoken, usual_reading

    said = dict(spoken("Henry VIII met Malcolm X, and I left."))
    assert usual_reading("rVIII") == "the eighth" and len(said["rVIII"]) == 4 and len(said["rX"]) == 4
    assert "i" in said or "i." in said  # "I" alone is the pronoun, never the numeral one
    # "James I." at a sentence's end, "Henry I," before a comma: a regnal number that may be the pronoun too
    assert "rI" in dict(spoken("A lease signed by James I.")) and usual_reading("rI") == "the first"
    assert "AY" in dict(spoken("Henry I, king of England."))["rI"]
    assert "rI" not in dict(spoken("Yesterday I left, and then I sat.")) and "rI" not in dict(spoken("Anna and I."))


def test_a_number_aligns_however_it_is_read():
    needs_speech_models()
    from tests import planted_faults
    from tpu_demo.segmenting.align import Aligner

    align = Aligner(0.4)
    tickets = "About 75% of the 1,200 tickets were sold."
    for written, said in [
        (tickets, "About seventy-five percent of the twelve hundred tickets were sold."),
        (tickets, "About seventy-five percent of the one thousand two hundred tickets were sold."),
        ("Flight 105 leaves at 6:30 pm.", "Flight one oh five leaves at six thirty P M."),
        ("Flight 105 leaves at 6:30 pm.", "Flight one hundred and five leaves at six thirty P M."),
        ("The shop opens at 6:00 on weekdays.", "The shop opens at six o'clock on weekdays."),
        ("The shop opens at 6:00 on weekdays.", "The shop opens at six on weekdays."),
        ("I paid £15 for the tickets.", "I paid fifteen pounds for the tickets."),
        ("He lives at 92 Baker Rd., next to the school.", "He lives at ninety two Baker Road, next to the school."),
        ("St. Paul lives at 5 Park Dr. with his dog.", "Saint Paul lives at five Park Drive with his dog."),
    ]:  # fmt: skip
        audio = planted_faults.speak(said, planted_faults.VOICES["alice"], 16000)
        result = align(audio, 16000, written)
        assert result["problem"] is None and result.get("otherwise") is None, (said, result)


def test_a_name_the_dictionary_lacks_gets_a_pronunciation(gruut):
    from tpu_demo.segmenting.spoken import pronunciations

    found = pronunciations("Okafor met Eze.")
    assert set(found) == {"okafor", "eze"} and all(found.values())  # "met" is the dictionary's
    assert pronunciations("x²") == {}  # no reading: the aligner says it is not in its dictionary


def test_units_end_at_sentences_not_inside_titles_or_dates(gruut):
    from tpu_demo.segmenting.align import text_units, unit_texts

    units = unit_texts(text_units("Dr. Okafor paid on March 3rd, 2021. Then J. K. Rowling spoke, briefly."))
    assert units == ["[S1] Dr. Okafor paid on March 3rd, 2021.", "[S1] Then J. K. Rowling spoke,", "[S1] briefly."]
    # "No.", "etc." and a letter after a lower-case word end their sentences
    units = unit_texts(text_units("Did you go? No. I read, etc. Then plan B. It worked."))
    assert units == [
        "[S1] Did you go?",
        "[S1] No.",
        "[S1] I read,",
        "[S1] etc.",
        "[S1] Then plan B.",
        "[S1] It worked.",
    ]


def test_an_abbreviation_before_a_number_or_a_lower_case_word_ends_no_sentence(gruut):
    from tpu_demo.segmenting.align import text_units, unit_texts

    units = unit_texts(
        text_units("Invoice no. 1138 is due. See fig. 3 and vol. 2 too. Pay it, etc. and so on. No. Go.")
    )
    assert units == [
        "[S1] Invoice no. 1138 is due.",
        "[S1] See fig. 3 and vol. 2 too.",
        "[S1] Pay it,",
        "[S1] etc. and so on.",
        "[S1] No.",
        "[S1] Go.",
    ]
    # letters with periods ("p.m.", "e.g.", "U.S."): a sentence goes on after them as after "etc."
    units = unit_texts(text_units("We met at 5 p.m. on Friday, e.g. a holiday. The U.S. economy grew at 9 a.m. Then"))
    assert units == [
        "[S1] We met at 5 p.m. on Friday,",
        "[S1] e.g. a holiday.",
        "[S1] The U.S. economy grew at 9 a.m.",
        "[S1] Then",
    ]


def test_a_piece_that_does_not_align_costs_only_itself_and_a_block_read_out_of_order_gets_no_text(gruut):
    # the script's sentences A..H; read A B, then a sentence the aligner cannot read (its piece fails), then E F G
    # before C D (a block read out of order), then H. The text is aligned in its order: C and D, said after G, are
    # dropped (a search that gave a piece any part not yet given handed far-away sentences to similar pieces)
    from tpu_demo.evaluation.intelligibility import normalise
    from tpu_demo.segmenting.align import align_text

    script = [f"Sentence {name} is said here by the reader at a steady pace." for name in "ABCDEFGH"]
    order = ["A", "B", None, "E", "F", "G", "C", "D", "H"]
    taken = ["A", "B", None, "E", "F", "G", None, None, "H"]
    found = pieces(*[(3.0 * number, 3.0 * number + 2.5) for number in range(len(order))])

    def align_piece(piece, text):
        said = order[round(piece.start / 3.0)]
        right = said is not None and normalise(text) == normalise(script["ABCDEFGH".index(said)])
        return {
            "confidence": 1.0 if right else 0.0,
            "problem": None if right else "the text does not align",
            "fit": 0.0 if right else None,
        }

    align_text(found, recording("[S1] " + " ".join(script)), align_piece)
    kept = [piece.text.split()[2] if piece.text else None for piece in found]
    assert kept == taken
    assert [piece.dropped for piece in found] == [None if said else "uncertain alignment" for said in taken]


@pytest.mark.xdist_group("segment")
def test_a_script_with_numbers_and_names_keeps_its_speech_with_the_words_said(tmp_path):
    _, report, scores = segment_planted(planted_speech.write_written_forms, tmp_path)
    for name, row in scores.items():
        assert row["good_kept"] >= 0.9 * row["good_seconds"], (name, row)
        assert row["wrong_text"] == 0 and row["cuts_inside"] == 0, (name, row)
    kept = [clip for clip in report["clips"] if clip["recording"] == "forms/script" and not clip["dropped"]]
    assert any("$42.50 on March 3rd, 2021." in clip["text"] for clip in kept)  # kept as written


@pytest.mark.xdist_group("segment")
def test_written_forms_read_by_a_voice_made_from_a_real_persons_recordings_keep_no_other_sentences_text(tmp_path):
    # flite's slt voice (Debian's flite, from a woman's recordings) reading the script: a piece took the next
    # sentence's text at alignment confidence 1.00
    if not shutil.which("flite"):
        pytest.skip("flite's voices come from Debian's flite: apt install flite")

    def write(folder):
        return planted_speech.write_read_by(folder, "slt/forms", "flite:slt", planted_speech.WRITTEN)

    _, report, scores = segment_planted(write, tmp_path)
    row = scores["slt/forms"]
    kept = [(clip["text"], clip["alignment"]) for clip in report["clips"] if not clip["dropped"]]
    assert row["wrong_text"] == 0, kept
    assert row["good_kept"] >= 0.8 * row["good_seconds"], row


def test_a_written_form_is_named_as_written_in_a_drop_reason(gruut):
    # the data page said "'n1015' said as 'ten fifteen'": the aligner's word, not the text's
    from tpu_demo.segmenting.spoken import as_written, spoken

    said = dict(spoken("Room 1015 cost £1.20 in 1916."))
    assert [as_written(word) for word in said] == ["room", "1015", "cost", "£1.20", "in", "1916"]


def test_a_filler_beside_a_written_form_is_heard():
    # "$15" and "9:00" were aligner words a grammar cannot hold: the filler check left out their pieces, and an
    # "um, um" the text lacks passed as clean
    needs_speech_models()
    from tests import planted_faults
    from tpu_demo.segmenting.align import Aligner

    align = Aligner(0.4)
    for written, said in [
        ("I paid $15 for the tickets yesterday.", "I paid fifteen dollars, um, um, for the tickets yesterday."),
        ("The train leaves at 9:00 from the station.", "The train leaves at nine, um, um, from the station."),
    ]:  # fmt: skip
        audio = planted_faults.speak(said, planted_faults.VOICES["alice"], 16000)
        result = align(audio, 16000, written)
        assert result["problem"] or "speech the text lacks" in (result.get("otherwise") or ""), (said, result)
