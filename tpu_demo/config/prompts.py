"""The texts a run speaks (`sample_prompts`) and `tpu_demo.generate` speaks, as the model reads them, checked before
anything is built."""

from tpu_demo.errors import FineTuneError
from tpu_demo.model.tokens import with_language


def prompt_text(item) -> str:
    """A prompt is a text, or a mapping with `text` and optional `speaker` (S1, S2) and `language` (a `[xx]` tag, as
    training puts before its texts: none for English)."""
    if isinstance(item, str):
        return item
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        raise FineTuneError(f"sample_prompts: {item!r} is neither a text nor a mapping with `text`")
    unknown = set(item) - {"text", "speaker", "language"}
    if unknown:
        raise FineTuneError(f"sample_prompts: {item!r} has unknown keys {', '.join(sorted(unknown))}")
    text = item["text"]
    if item.get("speaker") and not text.lstrip().startswith("["):
        text = f"[{item['speaker']}] {text}"
    return with_language(text, item.get("language"))


def check_prompts(prompts, tokenizer, max_text_tokens: int) -> list[str]:
    texts = [prompt_text(item) for item in prompts]
    for number, text in enumerate(texts, 1):
        length = len(tokenizer(text)["input_ids"])
        if length > max_text_tokens:
            raise FineTuneError(
                f"sample_prompts: prompt {number} is {length} tokens, longer than max_text_tokens {max_text_tokens}: "
                f"{text[:60]!r}"
            )
    return texts
