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


def test_step_time_leaves_out_what_is_paused_and_utilisation_divides_the_flops_by_the_peak(accelerator, clock):
    flops = SimpleNamespace(step=lambda texts, frames: 1e12 * len(texts), tail=16)  # 1 TFLOP a row
    stats = StepStats(accelerator, flops, peak=1e12, devices=2)
    batch = {"decoder_input_ids": torch.zeros(2, 40, 9), "text_tokens": [5, 7], "audio_frames": [24, 4]}
    stats.add_micro_batch(torch.tensor(1.0), labels(3), batch)
    stats.add_step(torch.tensor(1.0))
    clock.now += 2.0
    with stats.paused():  # an evaluation, samples or a checkpoint
        clock.now += 10.0
    logged = stats.read(lr=0.1)
    assert logged["step_seconds"] == 2.0 and logged["tokens_per_s"] == 3 / 2.0
    assert logged["mfu"] == pytest.approx(2e12 / (2.0 * 2 * 1e12))
    # the rows hold 24 + 16 and 4 + 16 of their 40 decoder positions (frames, BOS, EOS and the delay tail)
    assert logged["padding_share"] == pytest.approx(1 - (40 + 20) / 80)


def test_no_utilisation_without_a_known_peak(accelerator, clock):
    stats = StepStats(accelerator, SimpleNamespace(step=lambda texts, frames: 1.0, tail=16), peak=None)
    stats.add_micro_batch(
        torch.tensor(1.0),
        labels(3),
        {"decoder_input_ids": torch.zeros(1, 20, 9), "text_tokens": [3], "audio_frames": [4]},
    )
    stats.add_step(None)
    clock.now += 1.0
    assert "mfu" not in stats.read(lr=0.1)


@pytest.mark.parametrize(
    "name, peak",
    [
        ("NVIDIA H100 80GB HBM3", 989.4),
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H200", 989.4),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.1),
        ("NVIDIA L40", 181.0),
        ("NVIDIA L4", 121.0),
        ("TPU v5litepod", 197.0),
        ("TPU v4", 275.0),
        ("NVIDIA GeForce GTX 1080", None),
        (None, None),
    ],
)
def test_peak_of_a_device_by_the_name_it_reports(name, peak):
    from tpu_demo.runtime.peaks import peak_tflops

    assert peak_tflops(name) == peak


def test_model_flops_of_the_matrix_products_are_those_torch_counts():
    """Attention aside (torch's counter sees no eager attention's matmuls on CPU), the FLOPs of a step on one
    unpadded row are those torch's FLOP counter counts for the forward and backward."""
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.codes import DiaCollator
    from tpu_demo.model.dia import DELAY_PATTERN, tiny_config
    from tpu_demo.model.flops import ModelFlops
    from tpu_demo.training.loss import MODEL_INPUTS

    model = DiaForConditionalGeneration._from_config(tiny_config(128, 3))
    sample = {"index": 0, "text": "[S1] " + "word " * 30, "codes": torch.randint(0, 1024, (200, 9))}
    batch = DiaCollator(DELAY_PATTERN, 512, 200, 0.0, seed=0, multiple=1)([sample])
    with FlopCounterMode(display=False) as counter:
        model(**{k: batch[k] for k in MODEL_INPUTS}).loss.backward()
    flops = ModelFlops(model)
    with_attention = flops.step(batch["text_tokens"], batch["audio_frames"])
    flops.encoder_attention = flops.decoder_attention = flops.cross_attention = 0
    matrix_products = flops.step(batch["text_tokens"], batch["audio_frames"])
    assert matrix_products == pytest.approx(counter.get_total_flops(), rel=0.01)
    assert with_attention > matrix_products
