"""Before encoding, the data's text is reported per language: UTF-8 bytes per character (Dia reads a token per byte)
and the transcripts `max_text_tokens` would cut, so a user of a new language learns it before a long run."""

from pathlib import Path

from tests.testing_utils import require_dia

pytestmark = require_dia


def rows():
    from tpu_demo.data.audio import ManifestRow

    texts = [
        ("[S1] Hello there.", None),
        ("[S1] A longer English sentence than the limit allows.", None),
        ("[S1] Good night.", "en"),
        ("[S1] Привет, как дела?", "ru"),
        ("[S1] [ja] こんにちは", None),
    ]
    return [
        ManifestRow(row, Path(f"{row}.wav"), text, language=language) for row, (text, language) in enumerate(texts, 1)
    ]


def test_bytes_per_character_and_cut_transcripts_per_language():
    from transformers import DiaTokenizer

    from tpu_demo.data.languages import text_report

    lines = text_report(rows(), DiaTokenizer(), max_text_tokens=40)
    # the long English text is 50 tokens with its tag; Russian 30 bytes for 17 characters, Japanese 3 bytes each
    assert lines == [
        "text [-]: 2 transcripts, 1.00 UTF-8 bytes (Dia tokens) per character, 1 (50%) longer than max_text_tokens 40:"
        " dropped",
        "text [en]: 1 transcripts, 1.00 UTF-8 bytes (Dia tokens) per character, 0 (0%) longer than max_text_tokens 40:"
        " dropped",
        "text [ru]: 1 transcripts, 1.76 UTF-8 bytes (Dia tokens) per character, 0 (0%) longer than max_text_tokens 40:"
        " dropped",
        "text [ja]: 1 transcripts, 3.00 UTF-8 bytes (Dia tokens) per character, 0 (0%) longer than max_text_tokens 40:"
        " dropped",
    ]


def test_english_is_not_tagged_in_training_texts_nor_in_sample_prompts():
    # Dia learned English without a tag, and texts given to generate carry none: an [en] would be news to it
    from tpu_demo.config.prompts import prompt_text
    from tpu_demo.data.audio import ManifestRow

    languages = ["en", "en-GB", "EN_us", "english", "de", None]
    prompts = [ManifestRow(1, Path("1.wav"), "[S1] Hi.", language=language).prompt for language in languages]
    assert prompts == ["[S1] Hi."] * 4 + ["[de] [S1] Hi.", "[S1] Hi."]
    said = [prompt_text({"text": "Hi.", "speaker": "S1", "language": language}) for language in languages]
    assert said == prompts


def test_transcripts_without_a_speaker_tag_are_counted_with_the_fix():
    from transformers import DiaTokenizer

    from tpu_demo.data.audio import ManifestRow
    from tpu_demo.data.languages import text_report

    texts = ["Printing, in the only sense.", "[S1] Tagged.", "[de] [S2] Hallo.", " [S1] Leading space."]
    untagged = [ManifestRow(row, Path(f"{row}.wav"), text) for row, text in enumerate(texts, 1)]
    assert text_report(untagged, DiaTokenizer(), max_text_tokens=40)[-1] == (
        "text: 1 of 4 transcripts (rows 1) start with no speaker tag; Dia's texts (and generate's) start with [S1] or "
        "[S2]: add `[S1] ` to a single speaker's"
    )
    assert not any("speaker tag" in line for line in text_report(rows(), DiaTokenizer(), max_text_tokens=40))
