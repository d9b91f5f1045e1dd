"""Dia's audio token ids, the label no loss counts, and the text tags it reads but does not speak: defined once for
the data, the loss, samples, statistics and evaluation."""

import functools
import re

CODEBOOK_SIZE = 1024  # audio codes are 0..1023; the special tokens follow them
AUDIO_EOS, AUDIO_PAD, AUDIO_BOS = 1024, 1025, 1026
IGNORED_LABEL = -100  # cross-entropy's `ignore_index`, as transformers' models use it

TEXT_TAGS = re.compile(r"\[[^\]]*\]")  # speaker ([S1]) and language ([de]) tags


def with_language(text: str, language: str | None) -> str:
    """The text as Dia reads it in `language`: after a `[xx]` tag, as fine-tuners mark a language Dia has to learn;
    English as it is, since Dia learned English without a tag (and texts given to generate carry none)."""
    if not language or is_english(language):
        return text
    return f"[{language}] {text}"


def is_english(language: str) -> bool:
    """`en`, a regional `en-GB` (or `en_GB`), or Whisper's `english`."""
    name = language.strip().lower()
    return name in ("en", "english") or name.startswith(("en-", "en_"))


@functools.cache
def dia_tokenizer():
    from transformers import DiaTokenizer  # here: the commands import this module before they check the release

    return DiaTokenizer()  # Dia's byte tokenizer: no file to read


def text_tokens(text: str) -> int:
    """A text's length as training counts it against `max_text_tokens`: Dia's tokens (UTF-8 bytes, a tag one)."""
    return len(dia_tokenizer()(text)["input_ids"])
