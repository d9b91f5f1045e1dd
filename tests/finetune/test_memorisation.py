"""Training and generation agree on Dia's delay pattern, BOS and EOS: a small model that memorised a few clips says
each one again, code for code, when generated greedily through `tpu_demo.generate`'s code path, and continues a
clip's first half into its second."""

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.demo_utils import assert_ok, generate, run_demo, summary, tiny_codec
from tests.testing_utils import bug_on_unpatched, require_dia

soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytest.importorskip("soxr", reason="audio needs soundfile and soxr (pip install soundfile soxr)")
pytestmark = require_dia

RATE, HOP = 16000, 128  # the tiny codec's: 125 code frames per second
CLIPS = {"[S1] One.": (0.30, 220.0), "[S2] Two, two.": (0.26, 330.0), "[S1] Three, three, three?": (0.34, 440.0)}
ACCURACY = 0.95


def write_clips(folder: Path) -> Path:
    folder.mkdir(parents=True)
    lines = ["audio,text"]
    for number, (text, (seconds, pitch)) in enumerate(CLIPS.items()):
        t = np.arange(int(seconds * RATE)) / RATE
        chirp = 0.4 * np.sin(2 * np.pi * pitch * t * (1 + t)) * np.exp(-2 * t)  # each clip its own codes
        soundfile.write(folder / f"{number}.wav", chirp.astype(np.float32), RATE)
        lines.append(f'{number}.wav,"{text}"')
    (folder / "metadata.csv").write_text("\n".join(lines) + "\n")
    return folder / "metadata.csv"


def cached_codes(run: Path, audio: Path) -> torch.Tensor:
    """The codes the run trained on for `audio`: its cache is keyed by the file's content."""
    (codes,) = run.glob(f"audio_codes/*/{hashlib.sha256(audio.read_bytes()).hexdigest()}.pt")
    return torch.load(codes, weights_only=True)


def accuracy(generated: torch.Tensor, reference: torch.Tensor) -> list[float]:
    """Per codebook, the share of the reference's frames generated equal (a missing frame counts as wrong)."""
    length = min(len(generated), len(reference))
    same = (generated[:length] == reference[:length]).sum(dim=0).float()
    return (same / len(reference)).tolist()


@pytest.fixture(scope="module")
def memorised(tmp_path_factory):
    root = tmp_path_factory.mktemp("memorised")
    manifest = write_clips(root / "clips")
    torch.manual_seed(0)  # the codec's random weights: the same codes in every worker, so a failure reproduces
    settings = [f"dataset={manifest}", f"codec={tiny_codec(root / 'codec')}", "eval_samples=0", "max_steps=200"]
    settings += ["eval_strategy=no", "save_strategy=no", "per_device_train_batch_size=3", "max_audio_frames=64"]
    settings += ["warmup_steps=10", "logging_steps=50", "tiny_hidden_size=128", "text_dropout=0.2"]
    assert_ok(run_demo(root / "run", *settings, launcher=False))
    return root


def load_final(run: Path):
    from tpu_demo.evaluation.samples import generation_settings
    from tpu_demo.generate import find_processor, load_model

    model = load_model(run / "final", None)
    # no guidance: the conditional model's own most likely codes (guidance's difference to the unconditional model
    # is not what it memorised)
    return model, find_processor(run / "final", None), generation_settings(model, {"top_k": 1, "guidance_scale": 1})


@bug_on_unpatched  # the fine-tune stops at the state on the published release
def test_greedy_generation_says_each_memorised_clip_again(memorised):
    from tpu_demo.evaluation.samples import generate_codes, spoken_codes

    run = memorised / "run"
    assert summary(run)["last_loss"] < 0.05
    model, processor, settings = load_final(run)
    assert settings["do_sample"] is False
    for number, text in enumerate(CLIPS):
        reference = cached_codes(run, memorised / "clips" / f"{number}.wav")
        codes, _ = generate_codes(model, processor, [text], len(reference) + 20, settings)
        generated = spoken_codes(codes[0], model.config.delay_pattern)
        assert len(generated) == len(reference), (text, len(generated), len(reference))  # EOS in its place
        assert min(accuracy(generated, reference)) >= ACCURACY, (text, accuracy(generated, reference))


@bug_on_unpatched  # the fine-tune stops at the state on the published release
def test_a_memorised_clip_continues_from_its_first_half(memorised):
    from tpu_demo.data.audio import load_audio
    from tpu_demo.evaluation.samples import generate_codes, spoken_codes

    run = memorised / "run"
    model, processor, settings = load_final(run)
    text, audio = "[S1] Three, three, three?", memorised / "clips/2.wav"
    reference = cached_codes(run, audio)
    samples, _ = load_audio(audio, RATE)
    half = len(reference) // 2
    codes, prompt_len = generate_codes(
        model, processor, [""], len(reference), settings, samples[: half * HOP], prompt_text=text
    )
    continued = spoken_codes(codes[0], model.config.delay_pattern, int(prompt_len))
    assert min(accuracy(continued, reference[half:])) >= ACCURACY, accuracy(continued, reference[half:])


@bug_on_unpatched  # the fine-tune stops at the state on the published release
def test_greedy_decoding_from_the_command_line(memorised, tmp_path):
    # sampling with top_k 1 and the default guidance (3) met NaN probabilities on a trained Dia (a traceback)
    run = memorised / "run"
    for seed in (1, 2):
        assert_ok(
            generate(run / "final", "[S1] One.", "--top_k", "1", "--seed", seed, "--out", tmp_path / f"{seed}.wav")
        )
    assert (tmp_path / "1.wav").read_bytes() == (tmp_path / "2.wav").read_bytes()  # greedy: the seed plays no part


def test_every_clip_starts_where_generation_starts():
    # the collator padded on the left: a 5-frame clip's codes sat at position 20, where generation never starts
    from tpu_demo.data.codes import DiaCollator
    from tpu_demo.model.dia import DELAY_PATTERN
    from tpu_demo.model.tokens import AUDIO_BOS, AUDIO_EOS

    clips = [torch.randint(0, 1024, (frames, 9)) for frames in (5, 24)]
    samples = [{"codes": codes, "text": "[S1] Hi.", "index": i} for i, codes in enumerate(clips)]
    batch = DiaCollator(DELAY_PATTERN, 16, 24, text_dropout=0.0, seed=0)(samples)
    inputs, labels = batch["decoder_input_ids"], batch["labels"].view(2, 9, -1)
    for row, codes in enumerate(clips):
        for channel, delay in enumerate(DELAY_PATTERN):
            assert (inputs[row, : delay + 1, channel] == AUDIO_BOS).all()  # BOS at position 0, then the delay
            said = inputs[row, delay + 1 : delay + 1 + len(codes), channel]
            assert torch.equal(said, codes[:, channel])
            assert labels[row, channel, delay + len(codes)] == AUDIO_EOS  # the target after the last code
    assert batch["decoder_attention_mask"][0].tolist() == [1] * (1 + 5 + 1 + 15) + [0] * 18  # BOS..delay tail
