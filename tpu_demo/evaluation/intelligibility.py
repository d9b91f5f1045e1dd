"""Does the model say the words: samples transcribed by an ASR model (`eval_asr_model`, any transformers
speech-recognition model, e.g. a Whisper), and their character and word error rates against the text they were asked
to say, computed by jiwer on normalised text (case, punctuation, speaker and language tags do not count)."""

import re

import torch

from tpu_demo.errors import FineTuneError, require_folder
from tpu_demo.model.tokens import TEXT_TAGS
from tpu_demo.runtime.compat import LOAD_ERRORS

PUNCTUATION = re.compile(r"[^\w\s']")


def normalise(text: str) -> str:
    """What the error rates compare: the spoken words, lower case, without tags or punctuation."""
    return " ".join(PUNCTUATION.sub(" ", TEXT_TAGS.sub(" ", text)).lower().split())


def error_rates(references: list[str], hypotheses: list[str]) -> dict:
    """Character and word error rates over all pairs (jiwer pools the edits, as a corpus figure)."""
    try:
        import jiwer
    except ImportError:
        raise FineTuneError("eval_asr_model: error rates need jiwer (pip install jiwer)") from None
    references = [normalise(text) for text in references]
    hypotheses = [normalise(text) for text in hypotheses]
    if not any(references):
        raise FineTuneError("eval_asr_model: the texts to compare with have no words")
    # jiwer refuses an empty hypothesis; a model that said nothing deleted every word
    hypotheses = [text or "" for text in hypotheses]
    return {"cer": float(jiwer.cer(references, hypotheses)), "wer": float(jiwer.wer(references, hypotheses))}


class Transcriber:
    """A transformers ASR pipeline, on the host CPU beside training (on the main process only); `key`: the setting
    that names it; `language`: what a Whisper transcribes in."""

    def __init__(self, name_or_path: str, key="eval_asr_model", device="cpu", language=None):
        from transformers import pipeline

        require_folder(key, name_or_path)
        try:
            self.pipeline = pipeline("automatic-speech-recognition", model=name_or_path, device=device)
        except LOAD_ERRORS as error:
            said = " ".join(str(error).split())  # transformers' messages run over several lines
            raise FineTuneError(
                f"{key} {name_or_path}: not a speech recogniser transformers loads ({said[:300]})"
            ) from None
        self.sampling_rate = self.pipeline.feature_extractor.sampling_rate
        self.options = {}
        if language and self.pipeline.model.config.model_type == "whisper":
            from transformers.models.whisper.tokenization_whisper import LANGUAGES, TO_LANGUAGE_CODE

            if language.lower() not in LANGUAGES and language.lower() not in TO_LANGUAGE_CODE:
                raise FineTuneError(f"segment_language: Whisper knows no language {language!r} (e.g. de, german)")
            self.options = {"generate_kwargs": {"language": language.lower()}}

    def __call__(self, audio, sampling_rate: int) -> str:
        """The transcript of one clip (empty for empty audio)."""
        audio = torch.as_tensor(audio).float().flatten().numpy()
        if len(audio) == 0:
            return ""
        if sampling_rate != self.sampling_rate:
            import soxr

            audio = soxr.resample(audio, sampling_rate, self.sampling_rate)
        return self.pipeline({"raw": audio, "sampling_rate": self.sampling_rate}, **self.options)["text"].strip()
