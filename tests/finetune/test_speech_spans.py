"""The cut stage's spans (tpu_demo.segmenting.cut): speech the speech detector cut at the longest clip without a
silence (a run of quick turns) is split again where it is quiet; its other cuts are kept."""

import numpy as np

from tests.testing_utils import require_dia

pytestmark = require_dia
RATE = 16000


def speech_with_gaps(seconds: float, *gaps: tuple[float, float]) -> np.ndarray:
    """Loud noise standing for speech, silent in each (start, end) gap."""
    audio = 0.3 * np.random.default_rng(0).standard_normal(int(seconds * RATE)).astype(np.float32)
    for start, end in gaps:
        audio[int(start * RATE) : int(end * RATE)] = 0.0
    return audio


def test_speech_cut_without_a_silence_is_split_at_its_longest_quiet_stretches():
    from tpu_demo.segmenting.cut import split_where_quiet

    # turns 80-200 ms apart: Silero's hard cut at 15 s lies inside a word; the gaps are where the turns change
    audio = speech_with_gaps(30, (6.0, 6.1), (12.0, 12.08), (20.0, 20.2))
    assert split_where_quiet([(0.5, 15.5), (15.5, 29.5)], audio, 15.0) == [(0.5, 6.0), (6.1, 20.0), (20.2, 29.5)]
    # spans parted by a pause are Silero's own cuts; a stretch with no quiet place keeps Silero's cut
    assert split_where_quiet([(0.5, 14.0), (14.5, 29.5)], audio, 15.0) == [(0.5, 14.0), (14.5, 29.5)]
    assert split_where_quiet([(0.5, 15.5), (15.5, 29.5)], speech_with_gaps(30), 15.0) == [(0.5, 15.5), (15.5, 29.5)]
    # a gap shorter than 50 ms is no place to cut (a stop inside a word)
    short = speech_with_gaps(30, (14.0, 14.03))
    assert split_where_quiet([(0.5, 15.5), (15.5, 29.5)], short, 15.0) == [(0.5, 15.5), (15.5, 29.5)]


def test_a_long_piece_is_tried_with_as_many_units_as_it_can_hold():
    # a piece of quick turns holds 8 units of text: parts of at most 4 were tried, none of which could be right
    from tpu_demo.segmenting.align import MAX_PART_UNITS, SEARCH_UNITS, part_units

    characters = [10] * 40
    assert part_units(characters, 0, 100.0) == 15  # half again the piece's expected characters
    assert part_units(characters, 0, 10.0) == SEARCH_UNITS
    assert part_units(characters, 0, 1000.0) == MAX_PART_UNITS
    assert part_units(characters, 36, 100.0) == 4  # the text's end
