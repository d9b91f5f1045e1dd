"""The pieces of the loop the recipe runs: one training step, where training stands, and the folder checks."""

import contextlib
import math
from pathlib import Path

from tpu_demo.errors import FineTuneError
from tpu_demo.outputs import step_dirs
from tpu_demo.runtime.accelerator import forward_precision


def steps_apart(steps, max_steps: int) -> int:
    """A `logging_steps`, `eval_steps` or `save_steps` as the Trainer reads it: below 1, that fraction of the run."""
    return math.ceil(max_steps * steps) if steps and steps < 1 else int(steps or 0)


class Progress:
    """Where training stands; saved and restored with the rest of the state by `save_state`/`load_state`.
    `log_window`: the loop's sums since its last log, so a run resumed between two logs logs what it would have."""

    def __init__(self, best):
        self.step, self.epoch, self.batches_in_epoch, self.log_window = 0, 0, 0, None
        self.best = best  # a BestModel

    def state_dict(self):
        return {
            "step": self.step,
            "epoch": self.epoch,
            "batches_in_epoch": self.batches_in_epoch,
            "log_window": self.log_window,
            "best": self.best.state_dict(),
        }

    def load_state_dict(self, state):
        self.step, self.epoch, self.batches_in_epoch = state["step"], state["epoch"], state["batches_in_epoch"]
        self.log_window = state.get("log_window")  # absent from checkpoints of earlier versions
        if state.get("best"):
            self.best.load_state_dict(state["best"])


def train_step(accelerator, model, batch, optimizer, scheduler, max_grad_norm, loss_fn, sync: bool):
    """One micro-batch; `sync`: the last of its step, where gradients sync and the optimizer steps. Set here, as the
    Trainer sets it: accelerate finds an epoch's end in its loader's iteration, which XLA's prefetch thread runs ahead
    of the loop, so the loop would see that end at whichever batch it is on then (usually none)."""
    accelerator.gradient_state._set_sync_gradients(sync)
    with contextlib.nullcontext() if sync else accelerator.no_sync(model):
        with forward_precision(accelerator):
            loss = loss_fn.batch_loss(model, batch)
        # outside autocast, as torch advises: its cache would give a checkpointed layer's recompute the weight casts
        # its no-grad forward made, which carry no gradient
        accelerator.backward(loss)
        grad_norm = None
        if accelerator.sync_gradients:
            # as in the Trainer, 0 or less: no clipping (torch would scale the gradients by it); the norm is logged
            max_norm = max_grad_norm if max_grad_norm > 0 else math.inf
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
    return loss, grad_norm


def refuse_an_earlier_run(output_dir: Path) -> None:
    """A new run into the folder of an earlier one would mix their metrics and rotate away its own checkpoints."""
    saved = any(any(step.iterdir()) for step in step_dirs(output_dir / "checkpoints"))  # empty: not a run's
    earlier = ["checkpoints"] * saved + [name for name in ("metrics.jsonl", "final") if (output_dir / name).exists()]
    if earlier:
        held = f"output_dir {output_dir} holds an earlier run ({', '.join(earlier)})"
        if not saved:  # stopped before its first checkpoint, or saving none: nothing to continue from
            held += ", which saved no checkpoint"
        advice = "continue it with resume_from_checkpoint=latest, or give" if saved else "give"
        raise FineTuneError(f"{held}: {advice} a new output_dir (cache_dir can share its encoded audio)")
