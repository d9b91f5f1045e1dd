"""What the loop logs: loss, gradient norm, learning rate, tokens/s, step time, the share of padding, model FLOPs
utilisation where the device's peak is known, and peak memory. Sums stay on the device between logging steps and are
read with one transfer there, so no step waits for the host; what the host knows (lengths, FLOPs) it counts itself."""

import contextlib
import resource
import time

import torch
from accelerate.utils import DistributedType

from tpu_demo.training.loss import CodebookLoss


def peak_memory_mb(accelerator) -> float:
    """Peak device memory where the device reports it (CUDA, XLA), else the process's peak resident memory."""
    if accelerator.device.type == "cuda":
        return torch.cuda.max_memory_allocated(accelerator.device) / 2**20
    if accelerator.distributed_type == DistributedType.XLA:
        import torch_xla.core.xla_model as xm

        try:
            info = xm.get_memory_info(accelerator.device)
        except RuntimeError:  # PJRT's CPU device keeps no allocator statistics
            info = {}
        if info.get("peak_bytes_used"):
            return info["peak_bytes_used"] / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class StepStats:
    """`flops`: a `ModelFlops` (None: no FLOPs or utilisation); `peak`: the FLOP/s of one device, of which there are
    `devices` in all (processes times the devices each drives)."""

    def __init__(self, accelerator, flops=None, peak: float | None = None, devices: int = 1):
        self.accelerator, self.flops, self.peak, self.devices = accelerator, flops, peak, devices
        self.reset()

    def reset(self) -> None:
        # loss sum, gradient norm sum, target tokens
        self.sums = torch.zeros(3, device=self.accelerator.device)
        self.micro_batches, self.steps, self.since, self.paused_for = 0, 0, time.perf_counter(), 0.0
        self.host = [0.0, 0.0, 0.0]  # model FLOPs, decoder positions held, decoder positions padded to

    def add_micro_batch(self, loss, labels, batch=None) -> None:
        tokens = CodebookLoss.target_tokens(labels).float()
        self.sums = self.sums + torch.stack([loss.detach().float(), torch.zeros_like(loss, dtype=torch.float), tokens])
        self.micro_batches += 1
        if self.flops is not None and batch is not None:  # the collator's host lengths: no device read
            rows, positions = batch["decoder_input_ids"].shape[:2]
            self.host[0] += self.flops.step(batch["text_tokens"], batch["audio_frames"])
            self.host[1] += sum(min(frames + self.flops.tail, positions) for frames in batch["audio_frames"])
            self.host[2] += rows * positions

    def add_step(self, grad_norm) -> None:
        if grad_norm is not None:
            if hasattr(grad_norm, "full_tensor"):  # FSDP2's norm is a DTensor, the same on every process
                grad_norm = grad_norm.full_tensor()
            self.sums = self.sums + torch.nn.functional.pad(grad_norm.detach().float().reshape(1), (1, 1))
        self.steps += 1

    @contextlib.contextmanager
    def paused(self):
        """What is not the training step (evaluation, samples, checkpoints) does not count in its time."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.paused_for += time.perf_counter() - start

    def read(self, lr: float) -> dict:
        """Averages over processes and steps since the last read; the one host transfer of a logging step."""
        host = torch.tensor(self.host).to(self.accelerator.device)
        totals = self.accelerator.reduce(torch.cat([self.sums, host]), "sum").tolist()
        loss, grad_norm, tokens, flops, held, padded = totals
        processes = self.accelerator.num_processes
        elapsed = time.perf_counter() - self.since - self.paused_for
        metrics = {
            "loss": loss / (self.micro_batches * processes),
            "grad_norm": grad_norm / (max(self.steps, 1) * processes),
            "lr": lr,
            "tokens_per_s": tokens / elapsed,
            "step_seconds": elapsed / max(self.steps, 1),
            "peak_memory_mb": peak_memory_mb(self.accelerator),
        }
        if padded:
            metrics["padding_share"] = 1 - held / padded
        if flops and self.peak:
            metrics["mfu"] = flops / (elapsed * self.devices * self.peak)
        self.reset()
        return metrics

    def state_dict(self) -> dict:
        """The sums since the last read, over processes: a collective, called by every process."""
        loss, grad_norm, _ = self.accelerator.reduce(self.sums, "sum").tolist()
        return {"loss": loss, "grad_norm": grad_norm, "micro_batches": self.micro_batches, "steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        """Continues the sums of a `state_dict`; tokens/s counts from here (the time before is not known)."""
        self.reset()
        if self.accelerator.is_main_process:  # sums over processes: the next read adds them once
            self.sums = torch.tensor([state["loss"], state["grad_norm"], 0.0], device=self.accelerator.device)
        self.micro_batches, self.steps = state["micro_batches"], state["steps"]
