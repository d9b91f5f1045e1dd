"""Does the model say the words: samples transcribed by an ASR model (`eval_asr_model`, any transformers
speech-recognition model, e.g. a Whisper), and their character and word error rates against the text they were asked
to say, computed by jiwer on normalised text (case, punctuation, speaker and language tags do not count)."""

import contextlib
import re
from pathlib import Path

import torch

from tpu_demo.compat import LOAD_ERRORS
from tpu_demo.errors import FineTuneError, hub_unreachable, require_folder
from tpu_demo.model.tokens import TEXT_TAGS

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
            with quiet_transformers():  # a wrong model's load report runs over many lines: said in one below
                self.pipeline = pipeline("automatic-speech-recognition", model=name_or_path, device=device)
        except (*LOAD_ERRORS, KeyError) as error:  # KeyError: 4.x's pipeline on a config it has no ASR class for
            raise FineTuneError(load_failure(name_or_path, key, error)) from None
        if wrong := not_a_recogniser(name_or_path, key, self.pipeline.model.config):
            raise FineTuneError(wrong)
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

    @torch.no_grad()
    def heard(self, audio, sampling_rate: int) -> tuple[str, float | None]:
        """The transcript of one piece and the recogniser's confidence in it: the least probability it gave a token
        of a word it wrote (a speech-to-text model's at each step it generated; a CTC model's, a token's best frame),
        so one word it was unsure of makes the whole text unsure; None where it wrote no word."""
        audio = torch.as_tensor(audio).float().flatten().numpy()
        if len(audio) == 0:
            return "", None
        if sampling_rate != self.sampling_rate:
            import soxr

            audio = soxr.resample(audio, sampling_rate, self.sampling_rate)
        model = self.pipeline.model
        inputs = self.pipeline.feature_extractor(audio, sampling_rate=self.sampling_rate, return_tensors="pt")
        inputs = {name: value.to(model.device) for name, value in inputs.items()}
        if model.config.is_encoder_decoder:
            return self.generated(inputs)
        probabilities = model(**inputs).logits[0].float().softmax(-1)
        best, ids = probabilities.max(-1)
        text = self.pipeline.tokenizer.decode(ids).strip()  # repeats grouped, blanks left out, as the pipeline's
        runs = torch.cat([torch.ones(1, dtype=torch.long, device=ids.device), (ids[1:] != ids[:-1]).long()]).cumsum(0)
        written = runs[ids != self.pipeline.tokenizer.pad_token_id].unique().tolist()  # CTC's blank is its pad
        worded = [run for run in written if said(self.pipeline.tokenizer.decode(ids[runs == run][:1]))]
        return text, min((float(best[runs == run].max()) for run in worded), default=None)

    def generated(self, inputs: dict) -> tuple[str, float | None]:
        """A speech-to-text model's transcript, generated as the pipeline does, and the least probability the model
        gives a token of its words after the tokens before it, as `heard`."""
        model, tokenizer = self.pipeline.model, self.pipeline.tokenizer
        inputs = {
            name: value.to(model.dtype) if value.is_floating_point() else value for name, value in inputs.items()
        }
        options = self.options.get("generate_kwargs", {})
        if prepare := getattr(
            self.pipeline, "_prepare_generate_kwargs", None
        ):  # 5.x: the pipeline's (Whisper's beams)
            options = prepare(options)
        elif getattr(self.pipeline, "generation_config", None) is not None:  # 4.x passes its own, with those beams
            options = {"generation_config": self.pipeline.generation_config, **options}
        found = model.generate(**inputs, **options, return_dict_in_generate=True)
        tokens = found.sequences[:1]  # with its prompt (start, language, task): what the model was given
        start = model.generation_config.decoder_start_token_id
        if tokens[0, 0] != start:
            tokens = torch.cat([torch.full_like(tokens[:, :1], start), tokens], dim=1)
        logits = model(**inputs, decoder_input_ids=tokens[:, :-1]).logits[0].float()
        chosen = logits.softmax(-1).gather(1, tokens[0, 1:, None])[:, 0]
        special = set(tokenizer.all_special_ids)
        written = [float(probability) for probability, token in zip(chosen, tokens[0, 1:].tolist(), strict=True)
                   if token not in special and said(tokenizer.decode([token]))]  # fmt: skip
        return tokenizer.decode(tokens[0], skip_special_tokens=True).strip(), min(written, default=None)


def said(token: str) -> bool:
    """Whether a token writes a letter or a digit: punctuation and spaces change no word, and a recogniser is often
    unsure of a comma."""
    return any(character.isalnum() for character in token)


@contextlib.contextmanager
def quiet_transformers():
    """transformers' warnings and progress bars off: a probe of a model folder reports in one line of its own, not in
    transformers' multi-line load reports."""
    from transformers.utils import logging

    verbosity, bars = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def recogniser_architectures() -> set[str]:
    """The model classes the speech-recognition pipeline runs: a CTC head, or a speech-to-text decoder."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CTC_MAPPING_NAMES,
        MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES,
    )

    speech_to_text = {kind: name for kind, name in MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES.items() if kind != "dia"}
    return {*MODEL_FOR_CTC_MAPPING_NAMES.values(), *speech_to_text.values()}  # Dia is listed, but speaks text


def not_a_recogniser(name_or_path: str, key: str, config) -> str | None:
    """What the folder holds when the model class it was saved as is not a recogniser's (of another speech model, the
    pipeline would load the encoder under a random head, with a warning only); None when it is, or is not named."""
    architectures = getattr(config, "architectures", None) or []
    if not architectures or set(architectures) & recogniser_architectures():
        return None
    return (
        f"{key} {name_or_path}: holds a {', '.join(architectures)} (model type {config.model_type}), not a speech "
        "recogniser (no CTC or speech-to-text head): give a Whisper or a CTC model such as Wav2Vec2ForCTC, saved "
        "with save_pretrained"
    )


def load_failure(name_or_path: str, key: str, error: Exception) -> str:
    """Why a recogniser did not load, in one line: a hub id that cannot be fetched, or a folder of another kind of
    model (which often lacks the tokenizer a recogniser has), is named as such."""
    unreachable = None if Path(name_or_path).expanduser().is_dir() else hub_unreachable(error)
    if unreachable:
        return (
            f"{key} {name_or_path}: not a local folder, and {unreachable}: give a folder a recogniser was saved to "
            "with save_pretrained (its model and processor)"
        )
    from transformers import AutoConfig

    try:
        with quiet_transformers():
            wrong = not_a_recogniser(name_or_path, key, AutoConfig.from_pretrained(name_or_path))
    except LOAD_ERRORS:
        wrong = None  # no config either: transformers' own words below
    said = " ".join(str(error).split())  # transformers' messages run over several lines
    return wrong or f"{key} {name_or_path}: not a speech recogniser transformers loads ({said[:300]})"
