"""Prompt-conditioned training (`audio_prompts`): a training clip preceded by another clip of its speaker and that
clip's transcript, as `generate --audio_prompt` gives them, with the loss on the prompt masked."""

import json

import pytest
import torch

from tests.demo_utils import assert_ok, losses_by_step, run_demo, summary
from tests.testing_utils import bug_on_unpatched, require_dia
from tpu_demo.errors import FineTuneError

pytestmark = require_dia

DELAY = [0, 8, 9, 10, 11, 12, 13, 14, 15]


def codes_folder(folder, speakers, frames=(6, 9, 12, 6, 9, 12)):
    """Clips of known codes and texts, clip i of speaker `speakers[i]` (None: no speaker column)."""
    from tpu_demo.data.codes import CodesDataset

    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, speaker in enumerate(speakers):
        shape = (frames[i % len(frames)], 9)
        torch.save(torch.randint(0, 1024, shape, generator=torch.Generator().manual_seed(i)), folder / f"{i}.pt")
        item = {"file": f"{i}.pt", "text": f"[S1] clip {i}."}
        lines.append(json.dumps(item | ({"speaker": speaker} if speaker else {})))
    (folder / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    return CodesDataset(folder)


def collators(dataset, share=1.0, prompt_frames=12, frames=12, text_tokens=48, seed=0):
    from tpu_demo.data.codes import AudioPrompts, DiaCollator

    prompts = AudioPrompts(dataset, range(len(dataset)), share, prompt_frames)
    prompted = DiaCollator(DELAY, text_tokens, frames, 0.0, seed, prompts=prompts)
    plain = DiaCollator(DELAY, text_tokens, frames + prompt_frames, 0.0, seed)  # the same shapes, no prompts
    return prompted, plain


def test_a_prompted_clip_is_the_prompt_then_the_clip_with_the_prompts_loss_masked(tmp_path):
    dataset = codes_folder(tmp_path / "codes", [None] * 6)
    prompted, plain = collators(dataset)
    batch = prompted([dataset[0]])
    assert batch["prompted"] == [1]
    # what the collator makes of the two clips said one after the other, as `generate` continues a prompt: the one
    # prompt whose text, joined before the clip's, gives the batch's text
    candidates = [dataset[i] for i in range(1, 6)]
    joined = [{"index": 0, "text": f"{c['text']} [S1] clip 0.", "codes": torch.cat([c["codes"], dataset[0]["codes"]])}
              for c in candidates]  # fmt: skip
    ((expected, prompt),) = [
        (plain([one]), candidate) for one, candidate in zip(joined, candidates, strict=True)
        if torch.equal(plain([one])["input_ids"], batch["input_ids"])
    ]  # fmt: skip
    for key in ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask"):
        assert torch.equal(batch[key], expected[key]), key
    # the labels differ exactly where they would teach a frame of the prompt: label t of channel c is frame t + 1 - c's
    # delay, frames 1..P the prompt's
    labels, unmasked = batch["labels"].reshape(9, -1), expected["labels"].reshape(9, -1)
    frames = len(prompt["codes"])
    for channel, delay in enumerate(DELAY):
        positions = torch.arange(labels.shape[1])
        in_prompt = (positions + 1 - delay >= 1) & (positions + 1 - delay <= frames)
        assert (labels[channel][in_prompt] == -100).all()
        assert torch.equal(labels[channel][~in_prompt], unmasked[channel][~in_prompt])
    assert (unmasked[:, :frames] != -100).any()  # there was something to mask


def batch_text(batch) -> str:
    from transformers import DiaTokenizer

    ids = batch["input_ids"][0][batch["attention_mask"][0].bool()]
    return DiaTokenizer().decode(ids)


def test_prompts_come_from_another_clip_of_the_same_speaker(tmp_path):
    speakers = ["ann", "bob", "ann", "bob", "ann", "cy"]
    dataset = codes_folder(tmp_path / "codes", speakers)
    prompted, _ = collators(dataset)
    for epoch in range(4):
        prompted.epoch = epoch
        for i in range(6):
            batch = prompted([dataset[i]])
            if speakers[i] == "cy":  # the only clip of its speaker: nothing to prompt with
                assert batch["prompted"] == [0]
                continue
            prompt_number = int(batch_text(batch).split("clip ")[1].split(".")[0])  # "[S1] clip P. [S1] clip i."
            assert prompt_number != i and speakers[prompt_number] == speakers[i]


def test_prompts_are_drawn_by_sample_and_epoch_alone(tmp_path):
    dataset = codes_folder(tmp_path / "codes", [None] * 6)
    first, _ = collators(dataset, share=0.5, seed=3)
    again, _ = collators(dataset, share=0.5, seed=3)
    draws = [[first([dataset[i]])["prompted"][0] for i in range(6)] for first.epoch in range(8)]
    redraws = [[again([dataset[i]])["prompted"][0] for i in range(6)] for again.epoch in range(8)]
    assert draws == redraws  # a resumed run draws the same
    assert 0.3 < sum(map(sum, draws)) / 48 < 0.7 and len({tuple(d) for d in draws}) > 1


def test_a_prompt_that_does_not_fit_is_left_out_and_the_clip_is_never_cut(tmp_path):
    dataset = codes_folder(tmp_path / "codes", [None] * 6, frames=(10,))
    prompted, plain = collators(dataset, prompt_frames=8)  # every prompt is 10 frames
    batch, expected = prompted([dataset[0]]), plain([dataset[0]])
    assert batch["prompted"] == [0] and torch.equal(batch["labels"], expected["labels"])
    short_text, _ = collators(dataset, prompt_frames=12, text_tokens=len("[S1] clip 0.") + 2)
    assert short_text([dataset[0]])["prompted"] == [0]


@pytest.mark.parametrize(
    "settings, message",
    [
        (["audio_prompts=1.5"], "audio_prompts: 1.5 is not a share between 0 and 1"),
        (["audio_prompts=0.5"], "audio_prompt_max_frames: needed with audio_prompts"),
        (["audio_prompt_max_frames=24"], "audio_prompt_max_frames: set, but audio_prompts is 0"),
    ],
)
def test_prompt_settings_that_cannot_work_are_refused(settings, message):
    from tests.demo_utils import CONFIG
    from tpu_demo.config.checks import check_config
    from tpu_demo.config.load import load_raw

    with pytest.raises(FineTuneError, match=message):
        check_config(load_raw(CONFIG, settings))


@bug_on_unpatched
def test_prompted_training_resumes_exactly(tmp_path):
    settings = ["audio_prompts=0.5", "audio_prompt_max_frames=24", "max_text_tokens=96", "max_steps=6",
                "save_steps=2", "logging_steps=1", "eval_steps=3"]  # fmt: skip
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert_ok(run_demo(straight, *settings, launcher=False))
    assert_ok(run_demo(resumed, *settings, "stop_after_steps=3", launcher=False))
    assert_ok(run_demo(resumed, *settings, "resume_from_checkpoint=latest", launcher=False))
    assert losses_by_step(resumed) == losses_by_step(straight)
    assert 0.3 < summary(straight)["audio_prompted_share"] < 0.7
    without = tmp_path / "without"
    assert_ok(run_demo(without, *settings[3:], launcher=False))
    assert summary(without)["audio_prompted_share"] == 0 and losses_by_step(without) != losses_by_step(straight)


@bug_on_unpatched
def test_prompted_training_in_two_processes(tmp_path):
    out = tmp_path / "run"
    settings = ["audio_prompts=1.0", "audio_prompt_max_frames=24", "max_text_tokens=96", "max_steps=3",
                "distributed_type=MULTI_CPU", "num_processes=2", "eval_steps=3"]  # fmt: skip
    assert_ok(run_demo(out, *settings))
    # every sample of the synthetic set has another to prompt it with, and every prompt fits
    assert summary(out)["audio_prompted_share"] == 1.0 and summary(out)["num_processes"] == 2


@bug_on_unpatched
def test_a_run_whose_prompts_never_fit_says_so(tmp_path):
    out = tmp_path / "run"
    result = run_demo(out, "audio_prompts=1.0", "audio_prompt_max_frames=2", "max_steps=2", launcher=False)
    assert_ok(result)
    assert summary(out)["audio_prompted_share"] == 0  # every synthetic clip is 6 frames or more
    assert "audio prompts: 0% of this process's training samples had one (asked: 100%); none fitted" in result.stdout
