"""What the loop logs: loss, gradient norm, learning rate, tokens/s and peak memory. Sums stay on the device
between logging steps and are read with one transfer there, so no step waits for the host."""

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
    def __init__(self, accelerator):
        self.accelerator = accelerator
        self.reset()

    def reset(self) -> None:
        # loss sum, gradient norm sum, target tokens
        self.sums = torch.zeros(3, device=self.accelerator.device)
        self.micro_batches, self.steps, self.since = 0, 0, time.perf_counter()

    def add_micro_batch(self, loss, labels) -> None:
        tokens = CodebookLoss.target_tokens(labels).float()
        self.sums = self.sums + torch.stack([loss.detach().float(), torch.zeros_like(loss, dtype=torch.float), tokens])
        self.micro_batches += 1

    def add_step(self, grad_norm) -> None:
        if grad_norm is not None:
            if hasattr(grad_norm, "full_tensor"):  # FSDP2's norm is a DTensor, the same on every process
                grad_norm = grad_norm.full_tensor()
            self.sums = self.sums + torch.nn.functional.pad(grad_norm.detach().float().reshape(1), (1, 1))
        self.steps += 1

    def read(self, lr: float) -> dict:
        """Averages over processes and steps since the last read; the one host transfer of a logging step."""
        loss, grad_norm, tokens = self.accelerator.reduce(self.sums, "sum").tolist()
        processes, elapsed = self.accelerator.num_processes, time.perf_counter() - self.since
        metrics = {
            "loss": loss / (self.micro_batches * processes),
            "grad_norm": grad_norm / (max(self.steps, 1) * processes),
            "lr": lr,
            "tokens_per_s": tokens / elapsed,
            "peak_memory_mb": peak_memory_mb(self.accelerator),
        }
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
