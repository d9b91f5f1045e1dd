"""What the loop logs, without a run: `StepStats` on a one-process CPU Accelerator with a fake clock, its resume
state, and the peak memory off CUDA/XLA."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from accelerate.utils import DistributedType

import tpu_demo.training.step_stats
from tests.testing_utils import require_dia
from tpu_demo.training.step_stats import StepStats, peak_memory_mb

pytestmark = require_dia

# two optimizer steps of two micro-batches each: (loss, target tokens) per micro-batch, the gradient norm per step
WINDOW = [([(0.5, 3), (1.5, 4)], 2.0), ([(1.0, 5), (3.0, 6)], 4.0)]


class Clock:
    """`time.perf_counter` as the test sets it: tokens/s becomes exact."""

    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(tpu_demo.training.step_stats, "time", clock)
    return clock


def labels(targets: int) -> torch.Tensor:
    """A batch's labels with `targets` tokens a loss counts, among ignored ones (-100: padding, the text side)."""
    row = torch.full((12,), -100)
    row[:targets] = torch.arange(targets)  # 0 is a real audio code
    return row.reshape(2, 6)


def feed(stats, steps, dtype=torch.float32):
    for micro_batches, grad_norm in steps:
        for loss, targets in micro_batches:
            stats.add_micro_batch(torch.tensor(loss, dtype=dtype), labels(targets))
        stats.add_step(torch.tensor(grad_norm, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)  # bf16: the loss in mixed precision
def test_read_averages_loss_per_micro_batch_and_grad_norm_per_step(accelerator, clock, dtype):
    stats = StepStats(accelerator)
    feed(stats, WINDOW, dtype)
    clock.now += 2.0
    logged = stats.read(lr=0.25)
    assert logged["loss"] == (0.5 + 1.5 + 1.0 + 3.0) / 4
    assert logged["grad_norm"] == (2.0 + 4.0) / 2
    assert logged["lr"] == 0.25
    assert logged["tokens_per_s"] == (3 + 4 + 5 + 6) / 2.0  # target tokens only, over the window's time
    assert logged["peak_memory_mb"] > 0


def test_read_starts_a_new_window(accelerator, clock):
    stats = StepStats(accelerator)
    feed(stats, WINDOW)
    clock.now += 2.0
    stats.read(lr=0.1)
    feed(stats, [([(7.0, 9)], 5.0)])
    clock.now += 3.0
    logged = stats.read(lr=0.1)
    assert (logged["loss"], logged["grad_norm"], logged["tokens_per_s"]) == (7.0, 5.0, 9 / 3.0)


def test_a_restored_window_reads_as_the_uninterrupted_one(accelerator, clock):
    # resuming between two logs: the first log after the resume averages the whole window, as without the stop
    straight = StepStats(accelerator)
    feed(straight, WINDOW)
    clock.now += 4.0
    expected = straight.read(lr=0.1)

    before = StepStats(accelerator)
    feed(before, WINDOW[:1])
    saved = before.state_dict()
    after = StepStats(accelerator)
    after.load_state_dict(saved)
    clock.now += 4.0
    feed(after, WINDOW[1:])
    logged = after.read(lr=0.1)
    assert (logged["loss"], logged["grad_norm"]) == (expected["loss"], expected["grad_norm"])
    assert logged["tokens_per_s"] == (5 + 6) / 4.0  # the tokens since the resume: the time before is not known


def test_state_dict_leaves_the_window_as_it_was(accelerator):
    # it is taken at every checkpoint: the next log must not change
    stats, other = StepStats(accelerator), StepStats(accelerator)
    feed(stats, WINDOW[:1])
    feed(other, WINDOW[:1])
    assert stats.state_dict() == {"loss": 2.0, "grad_norm": 2.0, "micro_batches": 2, "steps": 1}
    feed(stats, WINDOW[1:])
    feed(other, WINDOW[1:])
    assert stats.read(lr=0.1)["loss"] == other.read(lr=0.1)["loss"]


def fake_accelerator(num_processes=1, is_main_process=True):
    """Processes that all had the same sums: `reduce` multiplies them by the number of processes."""
    return SimpleNamespace(
        device=torch.device("cpu"),
        distributed_type=DistributedType.MULTI_CPU,
        num_processes=num_processes,
        is_main_process=is_main_process,
        reduce=lambda tensor, reduction: tensor * num_processes,
    )


@pytest.mark.parametrize("is_main_process", [True, False])
def test_restored_sums_are_held_by_the_main_process_only(is_main_process):
    # the state holds the sums over processes: the next reduce must add them once, not once per process
    stats = StepStats(fake_accelerator(is_main_process=is_main_process))
    stats.load_state_dict({"loss": 3.0, "grad_norm": 8.0, "micro_batches": 4, "steps": 2})
    sums = 1.0 if is_main_process else 0.0
    assert stats.state_dict() == {"loss": 3.0 * sums, "grad_norm": 8.0 * sums, "micro_batches": 4, "steps": 2}


def test_read_averages_over_processes(clock):
    stats = StepStats(fake_accelerator(num_processes=2))
    feed(stats, WINDOW)
    clock.now += 2.0
    logged = stats.read(lr=0.1)
    assert (logged["loss"], logged["grad_norm"]) == (6.0 / 4, 6.0 / 2)
    assert logged["tokens_per_s"] == 2 * 18 / 2.0  # both processes' tokens


def test_peak_memory_on_cpu_is_the_process_peak_in_mib(accelerator):
    status = Path("/proc/self/status")
    if not status.is_file():
        pytest.skip("needs Linux's /proc")
    peak = peak_memory_mb(accelerator)
    resident_kib = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("VmRSS"))
    # at least what is resident now (torch alone takes hundreds of MiB), and MiB, not KiB or bytes
    assert resident_kib / 1024 * 0.99 <= peak < 64 * 1024
