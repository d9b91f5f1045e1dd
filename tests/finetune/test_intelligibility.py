"""Intelligibility with `eval_asr_model`: samples transcribed by a speech recognizer (a tiny random one here: the
plumbing, not its accuracy), and CER/WER by jiwer against what the model was asked to say."""

import math
import re

import pytest
import torch

from tests.demo_utils import assert_ok, metrics, run_demo, summary, tiny_asr, tiny_codec, tiny_speaker_model
from tests.testing_utils import bug_on_unpatched, require_dia

pytestmark = require_dia
jiwer = pytest.importorskip("jiwer", reason="error rates need jiwer (pip install jiwer)")


@pytest.mark.parametrize(
    "reference, hypothesis, cer, wer",
    [
        ("[S1] Hello there, world.", "hello there word", 1 / 17, 1 / 3),  # one letter of one word missing
        ("[S1] Hello there. [S2] Hi!", "HELLO THERE HI", 0.0, 0.0),  # tags, case and punctuation do not count
        ("[de] Guten Tag.", "", 1.0, 1.0),  # said nothing: every word deleted
    ],
)
def test_error_rates_on_known_strings(reference, hypothesis, cer, wer):
    from tpu_demo.evaluation.intelligibility import error_rates

    assert error_rates([reference], [hypothesis]) == pytest.approx({"cer": cer, "wer": wer})


def test_error_rates_pool_the_edits_of_all_texts():
    from tpu_demo.evaluation.intelligibility import error_rates

    # 1 word wrong of 2, 0 of 4: 1/6, not the mean of 1/2 and 0
    assert error_rates(["a b", "c d e f"], ["a x", "c d e f"])["wer"] == pytest.approx(1 / 6)


def test_the_transcriber_takes_audio_at_any_rate(tmp_path):
    pytest.importorskip("soxr")
    from tpu_demo.evaluation.intelligibility import Transcriber

    transcriber = Transcriber(str(tiny_asr(tmp_path / "asr")))
    tone = torch.sin(2 * math.pi * 220 * torch.arange(44100) / 44100)
    assert isinstance(transcriber(tone, 44100), str) and transcriber(torch.zeros(0), 16000) == ""


def test_a_hub_id_while_offline_is_named_as_such(monkeypatch):
    from huggingface_hub import constants

    from tpu_demo.errors import FineTuneError
    from tpu_demo.evaluation.intelligibility import Transcriber

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # read once, at import
    message = (
        "segment_asr_model nobody/no-recogniser: not a local folder, and the hub is offline (HF_HUB_OFFLINE is set): "
        "give a folder a recogniser was saved to with save_pretrained"
    )
    with pytest.raises(FineTuneError, match=f"^{re.escape(message)}"):
        Transcriber("nobody/no-recogniser", key="segment_asr_model")


def speech_encoder(folder):
    """A recogniser's folder (processor and all) whose weights are the bare encoder's: the pipeline loads it."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    folder = tiny_asr(folder)
    (folder / "model.safetensors").unlink()
    Wav2Vec2Model(Wav2Vec2Config.from_pretrained(folder)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    "make, found",
    [
        (tiny_speaker_model, "WavLMForXVector (model type wavlm)"),  # no tokenizer: the pipeline does not load it
        (speech_encoder, "Wav2Vec2Model (model type wav2vec2)"),  # loaded, under a random CTC head
    ],
    ids=["speaker_model", "encoder_without_head"],
)
def test_a_speech_model_that_is_no_recogniser_is_refused_in_one_line(tmp_path, capfd, make, found):
    from tpu_demo.errors import FineTuneError
    from tpu_demo.evaluation.intelligibility import Transcriber

    folder = make(tmp_path / "model")
    capfd.readouterr()
    message = f"eval_asr_model {folder}: holds a {found}, not a speech recogniser (no CTC or speech-to-text head): "
    with pytest.raises(FineTuneError, match=f"^{re.escape(message)}give a Whisper or a CTC model"):
        Transcriber(str(folder))
    printed = capfd.readouterr()
    assert printed.out == "" and printed.err == ""  # no load report of transformers', no progress bar


@bug_on_unpatched
def test_samples_and_held_out_texts_are_transcribed_and_scored(tmp_path):
    pytest.importorskip("soundfile")
    out = tmp_path / "run"
    settings = [f"codec={tiny_codec(tmp_path / 'codec')}", f"eval_asr_model={tiny_asr(tmp_path / 'asr')}",
                'sample_prompts=["[S1] Hello there."]', "sample_max_frames=8", "eval_asr_samples=2",
                "max_steps=2", "eval_steps=1", "metric_for_best_model=cer",
                "load_best_model_at_end=true", "save_steps=1"]  # fmt: skip
    assert_ok(run_demo(out, *settings, launcher=False))
    lines = metrics(out)
    evaluations = [line for line in lines if "eval_loss" in line]
    assert [line["step"] for line in evaluations] == [1, 2]
    for line in evaluations:
        assert 0 <= line["eval_cer"] and 0 <= line["eval_wer"]
    sampled = [line for line in lines if "sample/prompt-1/cer" in line]
    assert sampled and isinstance(sampled[-1]["sample/prompt-1/transcript"], str)
    health = summary(out)["sample_health"][0]
    assert {"transcript", "cer", "wer"} <= set(health)
    from tpu_demo.evaluation.intelligibility import error_rates

    assert health["cer"] == pytest.approx(error_rates(["[S1] Hello there."], [health["transcript"]])["cer"])
    # lower is better for an error rate, though TrainingArguments calls every name not ending in "loss" higher-better
    best = min(evaluations, key=lambda line: (line["eval_cer"], line["step"]))
    assert summary(out)["best_step"] == best["step"]


@pytest.mark.parametrize(
    "settings, message",
    [
        (["eval_asr_model=/nowhere/asr"], "eval_asr_model: needs `codec`"),
        (["eval_asr_samples=2"], "eval_asr_samples: set, but there is no eval_asr_model"),
        (["metric_for_best_model=wer", "load_best_model_at_end=true"], "metric_for_best_model: 'wer' is not a metric"),
    ],
)
def test_asr_settings_that_cannot_work_are_refused(tmp_path, settings, message):
    result = run_demo(tmp_path / "run", "max_steps=2", *settings, launcher=False)
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr


@bug_on_unpatched
def test_an_asr_folder_that_is_not_there_is_named(tmp_path):
    codec = tiny_codec(tmp_path / "codec")
    result = run_demo(tmp_path / "run", "max_steps=2", f"codec={codec}", "eval_asr_model=/nowhere/asr", launcher=False)
    assert result.returncode == 1 and "eval_asr_model /nowhere/asr: no such folder" in result.stderr
