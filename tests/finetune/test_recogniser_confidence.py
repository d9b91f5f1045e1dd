"""A recogniser's confidence in its transcript (`Transcriber.heard`: the least probability of a token of its words)
and what it decides: a no-transcript clip the recogniser was sure of goes to metadata.csv, others to review.csv
(`min_asr_confidence`). Tiny random recognisers test the arithmetic and the plumbing, not a real one's calibration."""

import json

import numpy as np
import pytest
import torch

from tests.demo_utils import assert_ok, tiny_asr, tiny_whisper
from tests.testing_utils import require_dia
from tpu_demo.errors import FineTuneError

pytestmark = require_dia


def speech_like(seconds=1.5, rate=16000):
    return np.random.default_rng(0).standard_normal(int(seconds * rate)).astype(np.float32) * 0.1


def saying_only(folder, token: str, logit: float):
    """The tiny CTC recogniser made to write `token` on every frame, at the probability that `logit` gives it
    against 0 for every other token of the vocabulary."""
    from transformers import Wav2Vec2ForCTC

    model = Wav2Vec2ForCTC.from_pretrained(folder)
    vocabulary = json.loads((folder / "vocab.json").read_text())
    with torch.no_grad():
        model.lm_head.weight.zero_()
        model.lm_head.bias.zero_()
        model.lm_head.bias[vocabulary[token]] = logit
    model.save_pretrained(folder)
    return float(np.exp(logit) / (np.exp(logit) + len(vocabulary) - 1))


@pytest.mark.parametrize("logit, token", [(6.0, "a"), (3.0, "a"), (6.0, "'")])
def test_a_ctc_recognisers_confidence_is_the_probability_of_its_least_sure_letter(tmp_path, logit, token):
    from tpu_demo.evaluation.intelligibility import Transcriber

    probability = saying_only(tiny_asr(tmp_path / "asr"), token, logit)
    transcriber = Transcriber(str(tmp_path / "asr"), key="segment_asr_model")
    text, confidence = transcriber.heard(speech_like(rate=24000), 24000)
    assert text == transcriber(speech_like(rate=24000), 24000) == token
    if token.isalnum():
        assert confidence == pytest.approx(probability, rel=1e-4)
    else:  # an apostrophe alone is no word: no confidence, and the piece is dropped as no words heard
        assert confidence is None


def test_a_whisper_recognisers_confidence_is_its_least_probable_written_token(tmp_path):
    from tpu_demo.evaluation.intelligibility import Transcriber

    transcriber = Transcriber(str(tiny_whisper(tmp_path / "whisper")), key="segment_asr_model", language="en")
    audio = speech_like()
    text, confidence = transcriber.heard(audio, 16000)
    assert text == transcriber(audio, 16000) and text
    # the same tokens' probabilities, teacher-forced after Whisper's prompt (start, language, task, no timestamps)
    model, tokenizer = transcriber.pipeline.model, transcriber.pipeline.tokenizer
    prompt = tokenizer.convert_tokens_to_ids(["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"])
    written = tokenizer(text, add_special_tokens=False).input_ids
    features = transcriber.pipeline.feature_extractor(audio, sampling_rate=16000, return_tensors="pt").input_features
    with torch.no_grad():
        logits = model(input_features=features, decoder_input_ids=torch.tensor([prompt + written])).logits[0]
    probabilities = logits[len(prompt) - 1 : -1].softmax(-1)[torch.arange(len(written)), written]
    assert confidence == pytest.approx(float(probabilities.min()), rel=1e-3)
    assert float(probabilities.max()) > confidence  # the least, not the first or the mean


def test_a_clip_the_recogniser_was_unsure_of_is_reviewed_and_one_it_was_sure_of_trained_on(tmp_path):
    from tpu_demo.config.arguments import RecordingsArguments
    from tpu_demo.segmenting.join import Clip
    from tpu_demo.segmenting.write import for_review, report_lines, summarise

    def clips():
        sure, unsure = Clip("a", 0, 2.0, asr_confidence=0.9), Clip("a", 3, 5.0, asr_confidence=0.4)
        return [sure, unsure, Clip("b", 0, 2.0), Clip("c", 0, 2.0, alignment=0.8)]  # b: pocketsphinx's, c: aligned

    kept = clips()
    assert for_review(kept, RecordingsArguments()) == kept[1:3]
    summary = summarise(kept, 3) | {"corrections": {"applied": 0, "unmatched": 0}}
    assert summary["recognised"] == {"clips": 1, "least_confidence": 0.9} and summary["review"]["clips"] == 2
    lines = report_lines(summary | {"segment_settings": {"segment_asr_model": "my-whisper"}}, tmp_path)
    assert any(line.startswith("1 kept clips carry the recogniser's transcript, each word's tokens at a probability "
                               "of 0.90 or more") for line in lines)  # fmt: skip
    assert any(line.startswith("the recogniser was less sure than min_asr_confidence") for line in lines)

    def reviewed(**settings) -> list[tuple]:
        return [(clip.recording, clip.start) for clip in for_review(clips(), RecordingsArguments(**settings))]

    assert reviewed(min_asr_confidence=0.3) == [("b", 0)]
    assert reviewed(min_asr_confidence=1.0) == [("a", 0), ("a", 3), ("b", 0)]
    assert reviewed(train_on_unchecked_text=True) == []


@pytest.mark.parametrize("value", [-0.1, 1.5])
def test_a_confidence_that_is_no_probability_is_refused(value):
    from tpu_demo.config.arguments import RecordingsArguments

    with pytest.raises(FineTuneError, match=f"^min_asr_confidence: {value} is not a probability between 0 and 1"):
        RecordingsArguments(min_asr_confidence=value)


NONSENSE = ["pace_tolerance=1000", "max_text_tokens=4096"]  # a random recogniser writes a letter a frame, at no pace


@pytest.mark.xdist_group("segment")
def test_the_recognisers_confidence_decides_which_transcripts_are_trained_on(tmp_path):
    from tests.finetune.test_segmenting import needs_speech_models, rows, segment_command, user_recordings

    needs_speech_models()
    raw = user_recordings(tmp_path / "podcast")  # alice's take2 has no text: the recogniser's words are its text
    asr = f"segment_asr_model={tiny_asr(tmp_path / 'asr')}"
    out = tmp_path / "clips"
    first = segment_command(out, f"recordings={raw}", asr, *NONSENSE)
    assert_ok(first)
    report = json.loads((out / "segment_report.json").read_text())
    heard = {clip["audio"]: clip["asr_confidence"] for clip in report["clips"] if clip["audio"] and clip["review"]}
    assert len(heard) >= 2 and all(0 < value < 0.5 for value in heard.values())  # a random model is unsure
    middle = sorted(heard.values())[len(heard) // 2]
    again = segment_command(out, f"recordings={raw}", asr, *NONSENSE, f"min_asr_confidence={middle}")
    assert_ok(again)
    trained = {row["audio"] for row in rows(out)} & set(heard)
    assert trained == {audio for audio, value in heard.items() if value >= middle}
    assert {row["audio"] for row in rows(out, "review.csv")} == set(heard) - trained
    assert "kept clips carry the recogniser's transcript, each word's tokens at a probability" in again.stdout


@pytest.mark.xdist_group("segment")
def test_a_recordings_own_text_in_another_language_is_trained_on_not_reviewed(tmp_path):
    # a German recording's own text, split over its clips through the recogniser's transcripts, went to review.csv as
    # "the recogniser's transcript, unchecked (no NAME.txt beside their recordings)"
    from tests.finetune.test_segmenting import needs_speech_models, rows, segment_command, user_recordings

    needs_speech_models()
    raw = user_recordings(tmp_path / "podcast")  # all but alice's take2 have their text
    asr = f"segment_asr_model={tiny_asr(tmp_path / 'asr')}"
    run = segment_command(
        tmp_path / "clips", f"recordings={raw}", asr, "segment_language=de", "max_asr_cer=100", *NONSENSE
    )
    assert_ok(run)
    trained, review = rows(tmp_path / "clips"), rows(tmp_path / "clips", "review.csv")
    assert trained and all("alice/take2" not in row["audio"] and row["language"] == "de" for row in trained)
    assert review and all("alice/take2" in row["audio"] for row in review)
    assert run.stdout.count("carry the recogniser's transcript, unchecked") == 1  # the review list's line only


def test_a_recogniser_no_recording_needs_is_named_not_ignored():
    # every recording with its English text is aligned by pocketsphinx: a Whisper named in segment_asr_model did
    # nothing, without a word
    from types import SimpleNamespace

    from tpu_demo.segment import unused_recogniser

    def config(model, language=None):
        return SimpleNamespace(recordings=SimpleNamespace(segment_asr_model=model, segment_language=language))

    with_text, without = SimpleNamespace(text="[S1] Hello there."), SimpleNamespace(text=None)
    line = unused_recogniser(config("my-whisper"), [with_text, with_text])
    assert line.startswith("segment_asr_model my-whisper: not used: each recording has its English text")
    assert unused_recogniser(config("my-whisper"), [with_text, without]) is None  # it transcribes one
    assert unused_recogniser(config("my-whisper", "de"), [with_text]) is None  # it splits a German text
    assert unused_recogniser(config("pocketsphinx"), [with_text]) is None  # the aligner's own
    assert unused_recogniser(config(None), [with_text]) is None


@pytest.mark.xdist_group("segment")
def test_a_recogniser_no_recording_needs_is_not_loaded(tmp_path):
    # every recording has its English text: a segment_asr_model that cannot be loaded refused the run, though the
    # run said it was not used
    from tests import planted_faults
    from tests.finetune.test_segmenting import needs_speech_models, rows, segment_command, user_recordings

    needs_speech_models()
    raw = user_recordings(tmp_path / "podcast")
    (raw / "alice" / "take2.txt").write_text("[S1] " + " ".join(planted_faults.SENTENCES[3:6]))
    run = segment_command(tmp_path / "clips", f"recordings={raw}", "segment_asr_model=nobody/no-recogniser")
    assert_ok(run)
    assert "segment_asr_model nobody/no-recogniser: not used: each recording has its English text" in run.stdout
    assert rows(tmp_path / "clips")
