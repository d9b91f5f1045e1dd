"""Batches sized by what they hold: the lengths a batch is padded to (`BatchLengths`), and an order that puts clips
of similar length together (`LengthGroupedSampler`, the Trainer's `group_by_length`)."""

import math

import torch

from tpu_demo.errors import FineTuneError


def round_up(value: int, multiple: int) -> int:
    return math.ceil(value / multiple) * multiple if multiple > 1 else value


class BatchLengths:
    """The text tokens and audio frames a batch is padded to, from its longest text and its longest audio.

    `buckets` 0: the longest of each, rounded up to `multiple` (at most the maximum); the shapes vary with the data,
    which eager CUDA and CPU do not mind. `buckets` N: each the smallest of N fixed lengths that holds it, length k
    being k/N of its maximum (rounded up to `multiple`), so XLA compiles for N x N shapes at most (text and audio grow
    together, so a run meets few of them); 1: every batch at the maxima.
    """

    def __init__(self, max_text_tokens: int, max_frames: int, multiple: int = 8, buckets: int = 0):
        if multiple < 1 or buckets < 0:
            raise FineTuneError(f"pad_to_multiple_of {multiple} must be 1 or more, length_buckets {buckets} 0 or more")
        self.max_text_tokens, self.max_frames, self.multiple, self.buckets = (
            max_text_tokens,
            max_frames,
            multiple,
            buckets,
        )

    def steps(self, maximum: int) -> list[int]:
        """The fixed lengths of `buckets` up to `maximum`: k/N of it, rounded up to the multiple."""
        steps = (round_up(math.ceil(maximum * k / self.buckets), self.multiple) for k in range(1, self.buckets + 1))
        return sorted({min(step, maximum) for step in steps})

    def fitted(self, value: int, maximum: int) -> int:
        """`value` rounded up to the multiple, or up to its bucket; never past `maximum`."""
        if self.buckets:
            return next(step for step in self.steps(maximum) if step >= value)
        return min(round_up(value, self.multiple), maximum)

    def shapes(self) -> list[tuple[int, int]]:
        """Every (text, frames) shape `buckets` allows (none with `buckets` 0)."""
        if not self.buckets:
            return []
        return [(text, frames) for text in self.steps(self.max_text_tokens) for frames in self.steps(self.max_frames)]

    def __call__(self, text_tokens: int, frames: int) -> tuple[int, int]:
        return self.fitted(text_tokens, self.max_text_tokens), self.fitted(frames, self.max_frames)


class LengthGroupedSampler(torch.utils.data.Sampler):
    """Every index once per epoch, in an order whose runs of `batch_size` hold clips of similar length, as the
    Trainer's `group_by_length` orders them: a permutation drawn from the seed and the epoch (so a resumed run draws
    the same), cut into mega-batches of up to 50 batches, each sorted longest first. The mega-batch holding the
    longest clip goes first, so a batch that does not fit in memory fails at the first step, not hours in."""

    def __init__(self, lengths, batch_size: int, seed: int, mega_batches: int = 50):
        self.lengths, self.batch_size, self.seed, self.mega_batches = list(lengths), batch_size, seed, mega_batches
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(len(self.lengths), generator=generator).tolist()
        # as the Trainer: fewer batches per mega-batch where the data is small, so the order stays random
        per_mega = max(1, min(self.mega_batches, len(order) // (self.batch_size * 4)))
        size = per_mega * self.batch_size
        megas = [sorted(order[i : i + size], key=lambda j: -self.lengths[j]) for i in range(0, len(order), size)]
        longest = max(range(len(megas)), key=lambda m: self.lengths[megas[m][0]])
        megas[0], megas[longest] = megas[longest], megas[0]
        return iter([index for mega in megas for index in mega])


def code_frames(dataset, indices) -> list[int]:
    """The audio frames of each sample of `dataset` (a `CodesDataset`) at `indices`: the manifest's count where it has
    one, else the code file's first dimension (read memory-mapped: the codes themselves are not loaded)."""
    frames = []
    for i in indices:
        item = dataset.items[i]
        if "frames" not in item:
            codes = torch.load(dataset.data_dir / item["file"], weights_only=True, mmap=True)
            item["frames"] = int(codes.shape[0])
        frames.append(item["frames"])
    return frames
