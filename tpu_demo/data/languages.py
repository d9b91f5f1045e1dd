"""What Dia's byte-level text input makes of each language in the data, said before encoding starts: UTF-8 bytes
per character (Dia reads one token per byte) and the transcripts longer than `max_text_tokens`, which are dropped."""

import re
from collections import Counter

from tpu_demo.model.tokens import TEXT_TAGS

LANGUAGE_TAG = r"\[([a-z]{2,3}(?:-[A-Za-z]+)?)\]"  # `[de]`, `[pt-BR]`
LEADING_LANGUAGE = re.compile(rf"^\s*(?:\[S\d\]\s*)?{LANGUAGE_TAG}")  # `[de] ...` or `[S1] [de] ...`
LEADING_SPEAKER = re.compile(rf"^\s*(?:{LANGUAGE_TAG}\s*)?\[S\d\]")  # `[S1] ...` or `[de] [S1] ...`


def language_of(row) -> str:
    """The row's `language`, else a leading `[xx]` tag of its text, else `-` (none given)."""
    if row.language:
        return row.language
    found = LEADING_LANGUAGE.match(row.text)
    return found.group(1) if found else "-"


def text_report(rows, tokenizer, max_text_tokens: int) -> list[str]:
    """One line per language, the most transcripts first: how many, UTF-8 bytes per character of their words (tags
    aside), and how many are longer than `max_text_tokens` tokens with their tags."""
    transcripts, characters, size, cut = Counter(), Counter(), Counter(), Counter()
    for row in rows:
        language, words = language_of(row), TEXT_TAGS.sub("", row.text).strip()
        transcripts[language] += 1
        characters[language] += len(words)
        size[language] += len(words.encode())
        cut[language] += len(tokenizer(row.prompt)["input_ids"]) > max_text_tokens
    lines = [
        f"text [{language}]: {count} transcripts, {size[language] / max(characters[language], 1):.2f} UTF-8 bytes "
        f"(Dia tokens) per character, {cut[language]} ({cut[language] / count:.0%}) longer than max_text_tokens "
        f"{max_text_tokens}: dropped"
        for language, count in transcripts.most_common()
    ]
    untagged = [row.row for row in rows if not LEADING_SPEAKER.match(row.prompt)]
    if untagged:
        shown = ", ".join(map(str, untagged[:5])) + (", ..." if len(untagged) > 5 else "")
        lines.append(
            f"text: {len(untagged)} of {len(rows)} transcripts (rows {shown}) start with no speaker tag; Dia's texts "
            "(and generate's) start with [S1] or [S2]: add `[S1] ` to a single speaker's"
        )
    return lines
