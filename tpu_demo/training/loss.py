"""The training loss as the original Dia fine-tuners had it: weights per codebook, optionally audio tokens only."""

import torch

from tpu_demo.errors import FineTuneError
from tpu_demo.model.tokens import AUDIO_EOS, IGNORED_LABEL

# What the collator's batches give the model (its `index` entry stays on the host).
MODEL_INPUTS = ("input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels")


class CodebookLoss:
    """Mean token cross-entropy over Dia's logits `(batch * channels, frames, vocab)`, row `b * channels + c`
    weighted by codebook `c`; with `audio_tokens_only` the EOS targets do not count either. Masks, no boolean
    indexing and no host sync: fixed shapes on XLA. With uniform weights over all targets it is the model's loss."""

    def __init__(self, num_channels: int, weights=None, audio_tokens_only: bool = False):
        weights = [1.0] * num_channels if weights is None else [float(w) for w in weights]
        if len(weights) != num_channels or min(weights) < 0 or not any(weights):
            raise FineTuneError(f"codebook_weights: {num_channels} non-negative weights, not all 0, got {weights}")
        self.weights = torch.tensor(weights)
        self.audio_tokens_only = audio_tokens_only
        # the model computes exactly this itself
        self.is_models_own = len(set(weights)) == 1 and not audio_tokens_only

    def weighted_tokens(self, logits, labels):
        """Each target's loss and its weight (0 where it does not count)."""
        valid = labels != IGNORED_LABEL
        if self.audio_tokens_only:
            valid = valid & (labels < AUDIO_EOS)
        token_loss = torch.nn.functional.cross_entropy(
            logits.float().transpose(1, 2), torch.where(valid, labels, 0), reduction="none"
        )
        rows = self.weights.to(logits.device).repeat(labels.shape[0] // len(self.weights))
        return token_loss, rows[:, None] * valid

    def batch_loss(self, model, batch):
        """The training loss of a batch: the model's own where it computes exactly this one (no second pass over the
        logits), else this loss on its logits."""
        if self.is_models_own:
            return model(**{k: batch[k] for k in MODEL_INPUTS}).loss
        logits = model(**{k: batch[k] for k in MODEL_INPUTS if k != "labels"}).logits
        return self(logits, batch["labels"])

    def sample_losses(self, model, batch):
        """Each sample's loss (evaluation gathers them across processes)."""
        logits = model(**{k: batch[k] for k in MODEL_INPUTS}).logits
        return self.per_sample(logits, batch["labels"], batch["input_ids"].shape[0])

    @staticmethod
    def target_tokens(labels):
        """How many targets a batch has (for tokens per second)."""
        return (labels != IGNORED_LABEL).sum()

    def __call__(self, logits, labels):
        token_loss, weight = self.weighted_tokens(logits, labels)
        return (token_loss * weight).sum() / weight.sum().clamp(min=torch.finfo(weight.dtype).tiny)

    def per_sample(self, logits, labels, batch_size: int):
        """The same loss for each sample of the batch (evaluation gathers them across processes)."""
        token_loss, weight = self.weighted_tokens(logits, labels)
        total = (token_loss * weight).reshape(batch_size, -1).sum(-1)
        return total / weight.reshape(batch_size, -1).sum(-1).clamp(min=torch.finfo(weight.dtype).tiny)
