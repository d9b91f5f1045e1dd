"""Speaker similarity with `eval_speaker_model`: samples and held-out texts embedded by a speaker-verification model (a
tiny random WavLM x-vector one here: the plumbing and the arithmetic, not its judgement) and compared with the voices
of the held-out recordings."""

import math
import re

import pytest
import torch

from tests.demo_utils import assert_ok, generate, metrics, run_demo, summary, tiny_asr, tiny_codec, tiny_speaker_model
from tests.testing_utils import bug_on_unpatched, require_dia

pytestmark = require_dia

RATE = 16000


def tone(frequency, seconds=1.0, rate=RATE):
    return torch.sin(2 * math.pi * frequency * torch.arange(int(seconds * rate)) / rate)


@pytest.fixture(scope="module")
def voices(tmp_path_factory):
    from tpu_demo.evaluation.voice import Voices

    found = Voices(str(tiny_speaker_model(tmp_path_factory.mktemp("sv"))))
    torch.manual_seed(0)
    found.add_references([("ann", tone(220), RATE), ("bob", torch.randn(RATE) * 0.3, RATE)])
    return found


def test_a_reference_clip_is_its_own_speaker(voices):
    assert voices.similarity(tone(220), RATE, "ann") == pytest.approx(1.0, abs=1e-5)
    other = voices.similarity(tone(220), RATE, "bob")
    assert -1 <= other < 0.999
    # a speaker without held-out recordings (or a sample prompt, which names none): the closest voice
    assert voices.similarity(tone(220), RATE, "carol") == pytest.approx(1.0, abs=1e-5)


def test_a_speakers_reference_is_the_mean_of_their_clips(tmp_path):
    from tpu_demo.evaluation.voice import Voices

    voices = Voices(str(tiny_speaker_model(tmp_path / "sv")))
    clips = [tone(220), tone(330)]
    voices.add_references([("ann", clip, RATE) for clip in clips])
    mean = torch.nn.functional.normalize(sum(voices.embed(clip, RATE) for clip in clips), dim=0)
    assert torch.allclose(voices.references["ann"], mean, atol=1e-6)


def test_a_long_clip_is_embedded_in_pieces(voices, monkeypatch):
    from tpu_demo.evaluation import voice

    # attention over a whole recording takes memory quadratic in its length (60 s ran a stand-in out of 22 GB);
    # pieces of 1 s here, not 10: the same splitting at a tenth of the tiny model's time
    monkeypatch.setattr(voice, "PIECE", 1)
    long = torch.cat([tone(220, 1), tone(330, 1), tone(440, 0.5)])
    pieces = [voices.embed(piece, RATE) for piece in long.split(RATE)]
    mean = torch.nn.functional.normalize(torch.stack(pieces).mean(0), dim=0)
    assert torch.allclose(voices.embed(long, RATE), mean, atol=1e-6)


def test_audio_at_another_rate_is_resampled(voices):
    pytest.importorskip("soxr")
    assert voices.similarity(tone(220, rate=44100), 44100, "ann") > 0.99


def test_silence_and_clips_too_short_to_embed_score_zero(voices):
    assert voices.similarity(torch.zeros(0), RATE) == 0.0
    assert voices.similarity(tone(220, seconds=0.001), RATE) == 0.0


def test_stability_is_the_mean_similarity_of_every_pair_of_takes(voices):
    a, b = tone(220), tone(330)
    assert voices.stability([a, a, a], RATE) == pytest.approx(1.0, abs=1e-5)
    ab = float(voices.embed(a, RATE) @ voices.embed(b, RATE))
    assert voices.stability([a, a, b], RATE) == pytest.approx((1 + 2 * ab) / 3, abs=1e-5)
    assert voices.stability([a, torch.zeros(0)], RATE) == 0.0  # a take that said nothing is no voice


def test_similarities_stay_within_minus_one_and_one_despite_float_rounding(voices, monkeypatch):
    generator = torch.Generator().manual_seed(0)
    unit = [torch.nn.functional.normalize(torch.randn(512, generator=generator), dim=0) for _ in range(4)][-1]
    assert float(unit @ unit) > 1  # float32 rounding of a unit vector's dot product with itself
    monkeypatch.setattr(voices, "embed", lambda audio, rate: unit)
    monkeypatch.setattr(voices, "references", {"ann": unit})
    assert voices.similarity(tone(220), RATE, "ann") == 1.0 and voices.similarity(tone(220), RATE) == 1.0
    assert voices.stability([tone(220), tone(220)], RATE) == 1.0


def test_a_speech_model_that_is_not_a_speaker_verifier_is_refused(tmp_path):
    from tpu_demo.errors import FineTuneError
    from tpu_demo.evaluation.voice import Voices

    # transformers would load a recogniser's encoder under a random x-vector head, with a warning only
    with pytest.raises(FineTuneError, match="not a speaker-verification .* Wav2Vec2ForCTC"):
        Voices(str(tiny_asr(tmp_path / "asr")))
    with pytest.raises(FineTuneError, match="eval_speaker_model /nowhere/sv: no such folder"):
        Voices("/nowhere/sv")


@bug_on_unpatched
def test_samples_and_held_out_texts_are_scored_and_pick_the_best_model(tmp_path):
    pytest.importorskip("soundfile")
    out = tmp_path / "run"
    settings = [f"codec={tiny_codec(tmp_path / 'codec')}", f"eval_speaker_model={tiny_speaker_model(tmp_path / 'sv')}",
                'sample_prompts=["[S1] Hello there."]', "sample_max_frames=8", "eval_asr_samples=2",
                "eval_voice_takes=3", "max_steps=3", "eval_steps=1", "metric_for_best_model=speaker_similarity",
                "load_best_model_at_end=true", "save_steps=1"]  # fmt: skip
    assert_ok(run_demo(out, *settings, launcher=False))
    lines = metrics(out)
    evaluations = [line for line in lines if "eval_loss" in line]
    assert [line["step"] for line in evaluations] == [1, 2, 3]
    for line in evaluations:
        assert -1 <= line["eval_speaker_similarity"] <= 1 and -1 <= line["eval_voice_stability"] <= 1
        assert "eval_cer" not in line  # no recogniser: no error rates
    sampled = [line for line in lines if "sample/prompt-1/speaker_similarity" in line]
    assert sampled and all(-1 <= line["sample/prompt-1/speaker_similarity"] <= 1 for line in sampled)
    result = summary(out)
    assert -1 <= result["sample_health"][0]["speaker_similarity"] <= 1
    assert result["eval_speaker_similarity"] is not None and result["eval_cer"] is None
    # higher is better for a similarity: the best model is the most similar evaluation (the earliest of equals)
    best = max(evaluations, key=lambda line: (line["eval_speaker_similarity"], -line["step"]))
    assert result["best_step"] == best["step"]


def test_recordings_keep_their_speaker_for_the_references(tmp_path):
    pytest.importorskip("soundfile")
    import soundfile

    from tpu_demo.data.audio import Codec, prepare
    from tpu_demo.data.layouts import read_recordings

    (tmp_path / "data").mkdir()
    rows = ["audio,text,speaker"]
    for number, (frequency, speaker) in enumerate([(220, "ann"), (330, "bob"), (440, "")], 1):
        soundfile.write(tmp_path / "data" / f"{number}.wav", tone(frequency).numpy(), RATE)
        rows.append(f"{number}.wav,Clip {number}.,{speaker}")
    (tmp_path / "data" / "metadata.csv").write_text("\n".join(rows) + "\n")
    recordings = read_recordings(tmp_path / "data", None)
    codec = Codec(str(tiny_codec(tmp_path / "codec")))
    items = prepare(recordings.rows, codec, tmp_path / "cache", 1000, "drop").items
    assert [item.get("speaker") for item in items] == ["ann", "bob", None]


@bug_on_unpatched
def test_processes_agree_on_the_scores_the_main_process_measured(tmp_path):
    out = tmp_path / "run"
    settings = [f"codec={tiny_codec(tmp_path / 'codec')}", f"eval_speaker_model={tiny_speaker_model(tmp_path / 'sv')}",
                "distributed_type=MULTI_CPU", "num_processes=2", "max_steps=6", "eval_steps=2", "save_steps=2",
                "metric_for_best_model=speaker_similarity", "early_stopping_patience=1",
                "load_best_model_at_end=true"]  # fmt: skip
    assert_ok(run_demo(out, *settings))
    evaluations = [line for line in metrics(out) if "eval_loss" in line]
    result = summary(out)
    # every process stops at the first evaluation that does not improve (patience 1), or the run would hang there
    similarity = [line["eval_speaker_similarity"] for line in evaluations]
    worse = [i for i in range(1, len(similarity)) if similarity[i] <= max(similarity[:i])]
    assert len(evaluations) == (worse[0] + 1 if worse else 3) and result["stopped_early"] == bool(worse)
    best = max(evaluations, key=lambda line: (line["eval_speaker_similarity"], -line["step"]))
    assert result["best_step"] == best["step"] and result["final_model_step"] == best["step"]


@bug_on_unpatched
def test_generate_prints_each_wavs_similarity_to_the_reference_clips(tmp_path):
    soundfile = pytest.importorskip("soundfile")
    from tpu_demo.evaluation.voice import Voices

    out, sv, me = tmp_path / "run", tiny_speaker_model(tmp_path / "sv"), tmp_path / "me.wav"
    assert_ok(run_demo(out, f"codec={tiny_codec(tmp_path / 'codec')}", "max_steps=2", launcher=False))
    soundfile.write(me, tone(220, rate=44100).numpy(), 44100)
    wav = tmp_path / "said.wav"
    result = generate(out / "final", "[S1] Hi.", "[S1] Bye.", "--out", wav, "--speaker_model", sv, "--reference", me)
    assert_ok(result)
    printed = dict(re.findall(r"^(\S+) \(.*speaker similarity (-?[\d.]+)\)$", result.stdout, re.MULTILINE))
    assert sorted(printed) == [str(tmp_path / "said-1.wav"), str(tmp_path / "said-2.wav")]
    voices = Voices(str(sv))
    voices.add_references([(None, tone(220), RATE)])
    for path, figure in printed.items():
        audio, rate = soundfile.read(path, dtype="float32")
        assert float(figure) == pytest.approx(voices.similarity(torch.from_numpy(audio), rate), abs=2e-3)
    # without --reference, the audio prompt is the voice
    prompted = generate(out / "final", "[S1] Hi.", "--out", wav, "--speaker_model", sv, "--audio_prompt", me,
                        "--audio_prompt_text", "[S1] Mm.")  # fmt: skip
    assert_ok(prompted)
    assert "speaker similarity" in prompted.stdout


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--reference", "me.wav"], "--reference: set, but there is no --speaker_model"),
        (["--speaker_model", "sv"], "--speaker_model: needs --reference clips (or an --audio_prompt)"),
        (["--speaker_model", "sv", "--reference", "nowhere.wav"], "--reference nowhere.wav does not exist"),
    ],
)
def test_generate_refuses_a_comparison_it_cannot_make(tmp_path, arguments, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "me.wav").touch()
    result = generate(tmp_path / "model", "[S1] Hi.", *arguments)
    assert result.returncode == 1 and message in result.stderr and "Traceback" not in result.stderr
