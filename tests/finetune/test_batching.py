"""Batches sized by what they hold: padding to the batch's longest clip (or a bucket) leaves the loss as padding to the
maxima leaves it, the shapes stay within their bound, and the length-grouped order is the Trainer's, drawn again
the same by a resumed run."""

import pytest
import torch
from parameterized import parameterized

from tests.testing_utils import bug_on_unpatched, require_dia
from tpu_demo.data.batching import BatchLengths, LengthGroupedSampler


def codes_sample(index: int, frames: int, words: int) -> dict:
    generator = torch.Generator().manual_seed(index)
    text = "[S1] " + " ".join(["word"] * words)
    return {"index": index, "text": text, "codes": torch.randint(0, 1024, (frames, 9), generator=generator)}


@require_dia
@pytest.mark.parametrize("weights, audio_only", [([1.0] * 9, False), ([4.0] + [1.0] * 8, True)])
@pytest.mark.parametrize("prompted", [False, True])
def test_loss_is_the_same_padded_to_the_batch_or_to_the_maxima(weights, audio_only, prompted):
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.codes import AudioPrompts, DiaCollator
    from tpu_demo.model.dia import tiny_config
    from tpu_demo.training.loss import CodebookLoss

    torch.manual_seed(0)
    model = DiaForConditionalGeneration(tiny_config()).eval()
    samples = [codes_sample(i, frames, words) for i, (frames, words) in enumerate([(9, 2), (30, 6), (17, 3)])]
    prompts = None
    if prompted:  # every clip preceded by another of its speaker: their frames are given, not learnt

        class Clips(list):
            items = [{"speaker": "S1"}] * 3

        prompts = AudioPrompts(Clips(samples), range(3), share=1.0, max_frames=40)
    loss = CodebookLoss(9, weights, audio_only)
    results = {}
    for buckets in (1, 0, 3):  # the maxima, the batch's longest, three buckets
        collate = DiaCollator(model.config.delay_pattern, 64, 48, 0.0, seed=0, prompts=prompts, buckets=buckets)
        batch = collate(samples)
        with torch.no_grad():
            results[buckets] = (loss.batch_loss(model, batch), loss.sample_losses(model, batch), batch)
    full, fitted = results[1][2], results[0][2]
    assert fitted["decoder_input_ids"].shape[1] < full["decoder_input_ids"].shape[1]
    assert fitted["input_ids"].shape[1] < full["input_ids"].shape[1]
    for buckets in (0, 3):
        torch.testing.assert_close(results[buckets][0], results[1][0], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(results[buckets][1], results[1][1], rtol=1e-5, atol=1e-6)
    # the target tokens are the same ones, only the padding differs
    assert (full["labels"] != -100).sum() == (fitted["labels"] != -100).sum()


@parameterized.expand([(1,), (2,), (4,), (7,)])
def test_buckets_bound_the_shapes_and_hold_every_batch(buckets):
    lengths = BatchLengths(max_text_tokens=100, max_frames=430, multiple=8, buckets=buckets)
    shapes = lengths.shapes()
    assert len(shapes) == buckets * buckets and shapes[-1] == (100, 430)  # text and audio each in one of N lengths
    seen = set()
    for text in range(1, 101, 7):
        for frames in range(1, 431, 13):
            shape = lengths(text, frames)
            assert shape[0] >= text and shape[1] >= frames
            seen.add(shape)
    assert seen <= set(shapes)


def test_a_short_batch_goes_to_the_smallest_bucket_even_where_the_maxima_differ_in_proportion():
    lengths = BatchLengths(max_text_tokens=128, max_frames=1720, multiple=8, buckets=4)
    assert lengths(75, 400) == (96, 432)  # text in its 3rd of 4 lengths, audio in its 1st


def test_without_buckets_a_batch_is_its_longest_rounded_up():
    lengths = BatchLengths(max_text_tokens=100, max_frames=430, multiple=8, buckets=0)
    assert lengths(13, 201) == (16, 208)
    assert lengths(99, 429) == (100, 430)  # never past the maxima
    assert BatchLengths(100, 430, multiple=1)(13, 201) == (13, 201)


def batches(sampler, batch_size):
    order = list(sampler)
    return [order[i : i + batch_size] for i in range(0, len(order) - batch_size + 1, batch_size)]


def test_grouped_order_is_every_index_once_the_same_for_a_seed_and_epoch():
    lengths = torch.randint(50, 1700, (500,), generator=torch.Generator().manual_seed(1)).tolist()
    sampler = LengthGroupedSampler(lengths, batch_size=4, seed=42)
    first = list(sampler)
    assert sorted(first) == list(range(500))
    assert list(LengthGroupedSampler(lengths, batch_size=4, seed=42)) == first  # a resumed run draws the same
    sampler.set_epoch(1)
    assert list(sampler) != first and sorted(sampler) == list(range(500))


def test_grouped_batches_pad_far_less_than_random_ones_and_the_longest_comes_first():
    lengths = torch.randint(50, 1700, (2000,), generator=torch.Generator().manual_seed(2)).tolist()

    def padded_share(groups):
        held = sum(lengths[i] for group in groups for i in group)
        return 1 - held / sum(max(lengths[i] for i in group) * len(group) for group in groups)

    grouped = batches(LengthGroupedSampler(lengths, batch_size=8, seed=0), 8)
    shuffled = torch.randperm(2000, generator=torch.Generator().manual_seed(0)).tolist()
    random = [shuffled[i : i + 8] for i in range(0, 2000, 8)]
    assert padded_share(grouped) < 0.05 < 0.25 < padded_share(random)
    assert max(lengths) in [lengths[i] for i in grouped[0]]


@bug_on_unpatched  # the program stops there with a clear message instead: test_unpatched_stops_clearly
def test_a_run_padded_to_its_batches_trains_and_evaluates_as_one_padded_to_the_maxima(tmp_path):
    """The same data in the same order: only the padding differs, so the losses agree to float rounding, while the
    padded share of the decoder's positions falls."""
    from tests.demo_utils import assert_ok, eval_losses, losses_by_step, metrics, run_demo

    settings = ["max_steps=6", "logging_steps=2", "eval_steps=6", "save_strategy=no", "max_audio_frames=48"]
    runs = {buckets: tmp_path / f"buckets{buckets}" for buckets in (1, 0)}
    for buckets, out in runs.items():
        assert_ok(run_demo(out, *settings, f"length_buckets={buckets}", launcher=False))
    for losses in (losses_by_step, eval_losses):
        fitted, full = losses(runs[0]), losses(runs[1])
        assert fitted.keys() == full.keys() and fitted
        assert all(fitted[step] == pytest.approx(full[step], rel=1e-4) for step in full), (fitted, full)
    share = {
        buckets: max(m["padding_share"] for m in metrics(out) if "padding_share" in m) for buckets, out in runs.items()
    }
    assert share[0] < 0.5 < share[1], share  # synthetic clips of 6-15 frames against 48


@require_dia
def test_a_batch_whose_texts_were_all_dropped_still_trains():
    """Classifier-free guidance drops texts: a batch of only dropped ones is padded to a text length, not to 0 (the
    encoder cannot take an empty sequence)."""
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.codes import DiaCollator
    from tpu_demo.model.dia import tiny_config
    from tpu_demo.training.loss import CodebookLoss

    model = DiaForConditionalGeneration(tiny_config())
    batch = DiaCollator(model.config.delay_pattern, 48, 24, text_dropout=1.0, seed=0)([codes_sample(0, 9, 2)])
    assert batch["input_ids"].shape[1] == 8 and batch["attention_mask"].sum() == 0
    loss = CodebookLoss(9).batch_loss(model, batch)
    assert torch.isfinite(loss)
