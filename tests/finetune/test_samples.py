"""Hearing the fine-tune: samples during training (two processes stay in step) and `python -m tpu_demo.generate`."""

import shutil
from pathlib import Path

import pytest

from tests.demo_utils import assert_ok, generate, run_demo, run_main, summary, tiny_codec, tiny_speaker_model
from tests.testing_utils import bug_on_unpatched, require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
# the checks read the two-process run of conftest.py
pytestmark = [require_dia, pytest.mark.xdist_group("two_process_run")]


@bug_on_unpatched  # the program stops at the state on the published release: test_unpatched_stops_clearly
def test_samples_are_written_at_the_codec_rate_by_the_main_process_only(two_process_run):
    out, result = two_process_run
    assert_ok(result)
    assert summary(out)["samples"] == ["samples/step-2", "samples/step-4"]
    for step in (2, 4):
        files = sorted((out / "samples" / f"step-{step}").iterdir())
        assert [f.name for f in files] == ["prompt-1.wav", "prompt-2.wav"]  # no partial files, one writer
        for file in files:
            info = soundfile.info(file)
            assert (info.samplerate, info.channels) == (16000, 1)


@bug_on_unpatched
def test_a_copied_output_folder_speaks_from_final_and_from_a_checkpoint(two_process_run, tmp_path):
    # the saved processor referred to its codec by the absolute path it was written at: a copy could not load
    import shutil

    out, result = two_process_run
    assert_ok(result)
    copied = shutil.copytree(out, tmp_path / "elsewhere" / "run")
    hidden = out.rename(out.with_name("hidden"))  # the original is gone, as on another machine
    try:
        for source in ("final", "checkpoints/step-2"):
            wav = tmp_path / f"{source.replace('/', '-')}.wav"
            assert_ok(generate(copied / source, "[S1] Hello there.", "--out", wav, cli=True))
            assert soundfile.info(wav).samplerate == 16000
    finally:
        hidden.rename(out)


@bug_on_unpatched
@pytest.mark.parametrize("source", ["final", "checkpoints/step-2"])
def test_generate_writes_audio_from_final_and_from_a_checkpoint(two_process_run, tmp_path, source):
    out, result = two_process_run
    assert_ok(result)
    wav = tmp_path / "said.wav"
    generated = generate(out / source, "[S1] Hello there.", "--out", wav, cli=source == "final")
    assert_ok(generated)
    audio, rate = soundfile.read(wav)
    assert rate == 16000 and audio.ndim == 1 and len(audio) > 0
    prompted = generate(out / source, "[S1] More.", "--out", tmp_path / "more.wav", "--audio_prompt", wav,
                        "--audio_prompt_text", "[S1] Hello there.")  # fmt: skip
    assert_ok(prompted)
    assert soundfile.info(tmp_path / "more.wav").samplerate == 16000


@bug_on_unpatched
@pytest.mark.parametrize(
    "case, message",
    [
        ("no_processor", "no DiaProcessor transformers can load"),
        ("prompt_without_text", "--audio_prompt and --audio_prompt_text go together"),
        ("missing_prompt", "--audio_prompt /nonexistent.wav does not exist"),
        ("not_a_model", "is not a Dia model folder"),
        ("cold", "temperature 0.5: transformers' Dia generation raises a temperature below 1 to 1"),
        ("no_candidate", "top_k 0: keep at least 1 candidate (1: greedy decoding)"),
        ("run_folder", "is a run's output folder: give"),
        ("truncated", "its weights cannot be read (Error while deserializing header"),
        ("nan_weights", "its weights hold NaN or inf"),
    ],
)
def test_generate_refuses_bad_input_clearly(two_process_run, tmp_path, case, message):
    # a truncated or NaN final/model.safetensors ended generate in a safetensors or sampling traceback
    out, result = two_process_run
    assert_ok(result)
    if case in ("truncated", "nan_weights"):
        from safetensors.torch import load_file, save_file

        damaged = Path(shutil.copytree(out / "final", tmp_path / "final")) / "model.safetensors"
        if case == "truncated":
            damaged.write_bytes(damaged.read_bytes()[:100])
        else:
            weights = load_file(damaged)
            weights[next(iter(weights))][...] = float("nan")
            save_file(weights, damaged, metadata={"format": "pt"})
    args = {
        "truncated": [tmp_path / "final", "x"],
        "nan_weights": [tmp_path / "final", "x"],
        "no_processor": [out / "checkpoints/step-2", "x", "--processor", tmp_path],
        "prompt_without_text": [out / "final", "x", "--audio_prompt", out / "samples/step-2/prompt-1.wav"],
        "missing_prompt": [out / "final", "x", "--audio_prompt", "/nonexistent.wav", "--audio_prompt_text", "y"],
        "not_a_model": [out / "samples", "x", "--processor", out / "final"],
        "cold": [out / "final", "x", "--temperature", "0.5"],
        "no_candidate": [out / "final", "x", "--top_k", "0"],
        "run_folder": [out, "x"],
    }[case]
    generated = generate(*args, "--out", tmp_path / "x.wav")
    assert generated.returncode == 1 and message in generated.stderr and "Traceback" not in generated.stderr
    assert not (tmp_path / "x.wav").exists()


@pytest.fixture(scope="module")
def speaker_model_run(tmp_path_factory):
    """One process, in this one: a run that compared voices with a speaker model and trained on 16 frames at most."""
    root = tmp_path_factory.mktemp("speaker_model_run")
    settings = [f"codec={tiny_codec(root / 'codec')}", f"eval_speaker_model={tiny_speaker_model(root / 'sv')}",
                "max_audio_frames=16", "max_steps=2", "save_steps=1", "eval_steps=2"]  # fmt: skip
    assert_ok(run_demo(root / "run", *settings, launcher=False))
    voice = root / "voice.wav"
    soundfile.write(voice, [0.1, -0.1] * 8000, 16000)
    return root / "run", voice


@bug_on_unpatched
@pytest.mark.parametrize("source", ["final", "checkpoints/step-1"])
def test_generate_compares_with_the_runs_speaker_model_by_default(speaker_model_run, tmp_path, source):
    out, voice = speaker_model_run
    compared = generate(out / source, "[S1] Hi.", "--out", tmp_path / "said.wav", "--reference", voice)
    assert_ok(compared)
    assert "speaker similarity" in compared.stdout
    alone = generate(out / source, "[S1] Hi.", "--out", tmp_path / "alone.wav")  # no voice to compare with
    assert_ok(alone)
    assert "speaker similarity" not in alone.stdout


@bug_on_unpatched
def test_generate_speaks_at_most_as_long_as_the_run_trained_unless_told(speaker_model_run, tmp_path, monkeypatch):
    import tpu_demo.generate

    out, _ = speaker_model_run
    asked, real = [], tpu_demo.generate.generate_checked

    def spied(model, processor, texts, max_new_tokens, *args):
        asked.append(max_new_tokens)
        return real(model, processor, texts, max_new_tokens, *args)

    monkeypatch.setattr(tpu_demo.generate, "generate_checked", spied)
    for extra in ([], ["--max_new_tokens", "20"]):
        assert_ok(run_main(tpu_demo.generate.main, [out / "final", "[S1] Hi.", "--out", tmp_path / "x.wav", *extra]))
    assert asked == [16 + 15, 20]  # max_audio_frames and Dia's delay pattern's tail; the command line wins
    helped = run_main(tpu_demo.generate.main, ["--help"])
    assert "(default: the run's max_audio_frames, the longest audio it trained on" in " ".join(helped.stdout.split())


def test_prompt_longer_than_the_text_length_is_named():
    from transformers import DiaTokenizer

    from tpu_demo.config.prompts import check_prompts
    from tpu_demo.errors import FineTuneError

    with pytest.raises(FineTuneError, match="prompt 2 is 30 tokens, longer than max_text_tokens 20"):
        check_prompts(["short", {"text": "x" * 30}], DiaTokenizer(), 20)


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"sample_every": 5}, "sample_every: set, but there are no sample_prompts"),
        ({"guidance_scale": 2.0}, "guidance_scale: set, but there are no sample_prompts"),
        ({"sample_prompts": ["hi"]}, "sample_prompts: needs `codec`"),
        ({"temperature": 0.7}, "temperature 0.7: transformers' Dia generation raises a temperature below 1 to 1"),
    ],
)
def test_sampling_settings_are_not_accepted_and_ignored(settings, message):
    from tpu_demo.config.checks import check_config
    from tpu_demo.errors import FineTuneError

    with pytest.raises(FineTuneError, match=message):  # when the config is read, before the model loads
        check_config(settings)


def test_a_written_wav_is_readable_as_any_new_file(tmp_path):
    # mkstemp made every WAV private (0600) whatever the umask
    import os

    import numpy as np

    from tpu_demo.evaluation.samples import write_wav

    umask = os.umask(0o022)
    try:
        write_wav(tmp_path / "said.wav", np.zeros(100), 16000)
    finally:
        os.umask(umask)
    assert (tmp_path / "said.wav").stat().st_mode & 0o777 == 0o644


def test_an_interrupted_write_leaves_no_partial_wav(tmp_path, monkeypatch):
    import numpy as np

    from tpu_demo.evaluation.samples import write_wav

    def interrupted(path, *args, **kwargs):
        open(path, "wb").write(b"RIFF")  # half a file, then the interruption
        raise KeyboardInterrupt

    monkeypatch.setattr(soundfile, "write", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_wav(tmp_path / "step-2" / "prompt-1.wav", np.zeros(100), 16000)
    assert list((tmp_path / "step-2").iterdir()) == []
