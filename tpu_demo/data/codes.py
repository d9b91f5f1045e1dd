"""Dia audio codes for training, a deterministic synthetic set, and batches padded to what they hold.

Codes come from a manifest of recordings (encoded once by `tpu_demo.data.audio`), or from a folder of pre-computed
codes: `metadata.jsonl` (one `{"file": ..., "text": ...}` per line) and, per sample, a `.pt` LongTensor of shape
(frames, channels) with codes in 0..1023. Nothing is ever written into a user's data folder.
"""

import json
import zlib
from pathlib import Path

import torch
from transformers import DiaProcessor, DiaTokenizer

from tpu_demo.data.batching import BatchLengths
from tpu_demo.errors import FineTuneError
from tpu_demo.model.tokens import AUDIO_BOS, AUDIO_EOS, AUDIO_PAD, CODEBOOK_SIZE, IGNORED_LABEL

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima".split()
FRAMES_PER_WORD = 3


def word_frames(word: str, num_channels: int) -> torch.Tensor:
    """The fixed code frames a word sounds like: learnable from the text alone."""
    generator = torch.Generator().manual_seed(zlib.crc32(word.encode()))
    return torch.randint(0, CODEBOOK_SIZE, (FRAMES_PER_WORD, num_channels), generator=generator)


def write_synthetic(data_dir, num_samples: int, num_channels: int = 9, seed: int = 0) -> Path:
    """Writes `num_samples` deterministic samples ("[S1] w1 w2 ..." and the words' frames) into `data_dir`."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    lines = []
    for i in range(num_samples):
        count = int(torch.randint(2, 6, (), generator=generator))
        words = [WORDS[int(j)] for j in torch.randint(0, len(WORDS), (count,), generator=generator)]
        torch.save(torch.cat([word_frames(w, num_channels) for w in words]), data_dir / f"{i:05d}.pt")
        lines.append(json.dumps({"file": f"{i:05d}.pt", "text": "[S1] " + " ".join(words)}))
    # metadata last: a folder with metadata is complete
    (data_dir / "metadata.jsonl").write_text("\n".join(lines) + "\n")
    return data_dir


class CodesDataset(torch.utils.data.Dataset):
    """Code files and their texts: a folder's `metadata.jsonl`, or `items` prepared from audio (both relative to
    `data_dir`)."""

    def __init__(self, data_dir, items=None, num_channels: int = 9, description: str | None = None):
        self.data_dir = Path(data_dir)
        self.num_channels = num_channels
        metadata = self.data_dir / "metadata.jsonl"
        if items is None and not metadata.is_file():
            raise FineTuneError(
                f"{self.data_dir} has no metadata.jsonl (dataset: a folder of codes, a manifest, or synthetic)"
            )
        if items is None:
            items = []
            for number, line in enumerate(metadata.read_text(encoding="utf-8-sig").splitlines(), 1):
                try:
                    items += [json.loads(line)] if line.strip() else []
                except json.JSONDecodeError as error:
                    raise FineTuneError(f"{metadata}, line {number}: not JSON ({error.msg})") from None
        self.items = items
        # what the run trains on, for its closing summary: preparation counts (truncated, dropped, ...) if any
        self.description = description or f"{len(items)} samples of pre-computed codes from {self.data_dir}"
        missing = [item["file"] for item in self.items if not (self.data_dir / item["file"]).is_file()]
        if missing:
            raise FineTuneError(
                f"{self.data_dir}: {len(missing)} code files listed in metadata.jsonl are missing, e.g. {missing[0]}"
            )

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        item = self.items[i]
        codes = torch.load(self.data_dir / item["file"], weights_only=True)
        where = f"{item['file']} (sample {item.get('row', i + 1)})"
        if codes.dim() != 2 or codes.shape[1] != self.num_channels:
            raise FineTuneError(f"{where}: codes must be (frames, {self.num_channels}), got {tuple(codes.shape)}")
        if codes.numel() and (codes.min() < 0 or codes.max() >= CODEBOOK_SIZE):
            found = f"{int(codes.min())}..{int(codes.max())}"
            raise FineTuneError(f"{where}: codes must lie in 0..{CODEBOOK_SIZE - 1}, got {found}")
        return {"index": i, "text": item["text"], "codes": codes.long()}


class DiaCollator:
    """Builds Dia batches with `DiaProcessor`'s delay helpers, padded to the lengths `BatchLengths` gives (on XLA a
    fixed set of them, each compiling to one graph).

    Each sample as `DiaProcessor(text, audio, output_labels=True)` builds one from audio (BOS, the codes, EOS, delayed
    per channel; labels the next delayed frame with BOS/PAD set to -100), padded on the right with PAD to one length.
    So BOS is at position 0, where generation starts: the processor pads a batch on the left, which would train each
    clip's codes at a position set by its length, and the model then fails to say a clip it memorised.
    """

    def __init__(self, delay_pattern, max_text_tokens: int, max_audio_frames: int, text_dropout: float, seed: int,
                 prompts=None, multiple: int = 8, buckets: int = 0):  # fmt: skip
        """`prompts`: an `AudioPrompts` that precedes training clips with another clip of their speaker. `multiple`,
        `buckets`: the lengths a batch is padded to (`BatchLengths`; `buckets` 1: always the maxima)."""
        self.tokenizer = DiaTokenizer()
        self.delay_pattern = list(delay_pattern)
        self.max_text_tokens = max_text_tokens
        self.max_audio_frames = max_audio_frames
        prompt_frames = prompts.max_frames if prompts else 0
        self.lengths = BatchLengths(max_text_tokens, prompt_frames + max_audio_frames, multiple, buckets)
        self.text_dropout = text_dropout
        self.seed = seed
        self.epoch = 0
        self.prompts = prompts

    def chance(self, index: int, salt: int = 0) -> torch.Generator:
        # Seeded by sample and epoch, not by the global RNG: a resumed run draws exactly the same.
        return torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch * 100_003 + index + salt)

    def drop_text(self, index: int) -> bool:
        return bool(torch.rand((), generator=self.chance(index)) < self.text_dropout)

    def prompt_for(self, sample, text: str):
        """(prompt codes, the text with the prompt's transcript first) or None: a prompt only where it and its
        transcript fit (`AudioPrompts.max_frames`, max_text_tokens), so no clip is ever cut for one."""
        prompt = self.prompts.pick(sample["index"], self.chance(sample["index"], salt=7))
        if prompt is None or len(prompt["codes"]) > self.prompts.max_frames:
            return None
        joined = f"{prompt['text']} {text}" if text else text  # a dropped text drops the prompt's too
        if len(self.tokenizer(joined)["input_ids"]) > self.max_text_tokens:
            return None
        return prompt["codes"], joined

    def __call__(self, samples):
        texts = ["" if self.drop_text(s["index"]) else s["text"] for s in samples]
        prompts = [self.prompt_for(s, t) if self.prompts else None for s, t in zip(samples, texts, strict=True)]
        texts = [t if p is None else p[1] for t, p in zip(texts, prompts, strict=True)]
        text = self.tokenizer(texts, truncation=True, max_length=self.max_text_tokens)
        num_channels = len(self.delay_pattern)
        max_delay = max(self.delay_pattern)
        clips = []  # each row's frames: [prompt] + codes
        for sample, prompt in zip(samples, prompts, strict=True):
            codes = sample["codes"][: self.max_audio_frames, :num_channels]
            clips.append(codes if prompt is None else torch.cat([prompt[0][:, :num_channels], codes]))
        text_tokens = [len(ids) for ids in text["input_ids"]]
        # at least one text position: a batch whose texts were all dropped still feeds the encoder (masked pads)
        text_length, frames = self.lengths(max(1, *text_tokens), max(len(codes) for codes in clips))
        text = self.tokenizer.pad(text, padding="max_length", max_length=text_length, return_tensors="pt")
        length = frames + 2  # BOS + [prompt] + codes + EOS
        audio = torch.full((len(samples), length + max_delay, num_channels), AUDIO_PAD, dtype=torch.long)
        mask = torch.zeros((len(samples), length + max_delay), dtype=torch.long)
        prompted = [0 if prompt is None else len(prompt[0]) for prompt in prompts]  # frames of each row's prompt
        for row, codes in enumerate(clips):
            audio[row, 0] = AUDIO_BOS
            audio[row, 1 : len(codes) + 1] = codes
            audio[row, len(codes) + 1] = AUDIO_EOS
            mask[row, : len(codes) + 2 + max_delay] = 1  # BOS, the codes, EOS and the delay tail

        indices = DiaProcessor.build_indices(
            bsz=len(samples), seq_len=length + max_delay, num_channels=num_channels, delay_pattern=self.delay_pattern
        )
        delayed = DiaProcessor.apply_audio_delay(
            audio=audio, pad_token_id=AUDIO_PAD, bos_token_id=AUDIO_BOS, precomputed_idx=indices
        )
        labels = delayed[:, 1:].clone()
        labels = torch.where((labels == AUDIO_PAD) | (labels == AUDIO_BOS), IGNORED_LABEL, labels)
        for row, given in enumerate(prompted):
            for channel, delay in enumerate(self.delay_pattern):  # label t of a channel is frame t + 1 - delay
                labels[row, delay : given + delay, channel] = IGNORED_LABEL  # the prompt is given, not learnt
        return {
            "input_ids": text["input_ids"],
            "attention_mask": text["attention_mask"],
            "decoder_input_ids": delayed[:, :-1],
            "decoder_attention_mask": mask[:, :-1],
            # contiguous: for one sample the reshape is a strided view, and the model's loss calls `labels.view(-1)`
            "labels": labels.transpose(1, 2).reshape(len(samples) * num_channels, -1).long().contiguous(),
            "index": [s["index"] for s in samples],  # host ints: device loaders pass them through untouched
            "prompted": [int(frames > 0) for frames in prompted],
            # what the rows hold, for the compute a step did on them (host ints, as `index`)
            "text_tokens": text_tokens,
            "audio_frames": [len(codes) for codes in clips],
        }


class AudioPrompts:
    """For `audio_prompts`: picks, for a training clip, another training clip of the same speaker (the manifest's
    `speaker`; without one the data is one speaker) with probability `share`."""

    def __init__(self, dataset, indices, share: float, max_frames: int):
        self.dataset, self.share, self.max_frames = dataset, share, max_frames
        self.by_speaker = {}
        for i in indices:
            self.by_speaker.setdefault(dataset.items[i].get("speaker"), []).append(i)

    def pick(self, index: int, generator: torch.Generator):
        """A sample of the same speaker, or None (drawn not to be prompted, or the speaker's only clip)."""
        if float(torch.rand((), generator=generator)) >= self.share:
            return None
        others = [i for i in self.by_speaker.get(self.dataset.items[index].get("speaker"), []) if i != index]
        if not others:
            return None
        return self.dataset[others[int(torch.randint(len(others), (), generator=generator))]]


def split(dataset_size: int, eval_samples: int, seed: int, held_out=()) -> tuple[list[int], list[int]]:
    """A random train/eval split, the same for the same seed (and so for a resumed run). With the data's own held-out
    samples (a test split), evaluation takes `eval_samples` of them and training every other sample."""
    order = torch.randperm(dataset_size, generator=torch.Generator().manual_seed(seed)).tolist()
    if held_out:
        held_out = set(held_out)
        chosen = [i for i in order if i in held_out][:eval_samples]
        return sorted(i for i in order if i not in held_out), sorted(chosen)
    n_eval = min(eval_samples, dataset_size - 1)
    return sorted(order[n_eval:]), sorted(order[:n_eval])


def enough_for_a_step(samples: int, train_samples: int, eval_samples: int, args, processes: int) -> None:
    """Refuses data that gives no training batch (the loop would wait for one forever), or no held-out sample to
    evaluations asked for (each would be skipped)."""
    strategy = getattr(args.eval_strategy, "value", args.eval_strategy)  # an IntervalStrategy once parsed
    if eval_samples and samples == train_samples and strategy != "no":
        raise FineTuneError(
            f"{samples} samples: none left to hold out for evaluation (eval_samples: {eval_samples}, eval_strategy: "
            f"{strategy}) with one for training: add data, or set eval_samples: 0 and eval_strategy: no"
        )
    needed = args.per_device_train_batch_size * processes
    if train_samples < needed:
        raise FineTuneError(
            f"{samples} samples, {samples - train_samples} held out for evaluation (eval_samples: {eval_samples}), "
            f"{train_samples} left for training; one training step needs per_device_train_batch_size "
            f"({args.per_device_train_batch_size}) x {processes} process(es) = {needed}: lower eval_samples or the "
            "batch size, or add data"
        )
