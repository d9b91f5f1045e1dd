"""The devices' peak compute, in one place: dense 16-bit (bf16, or fp16 where a device has no bf16) tensor TFLOP/s
per device as their makers publish them, without sparsity. Model FLOPs utilisation divides by it."""

import torch

# (a lowercase part of the name the device reports, peak TFLOP/s); the first that matches wins, so the more specific
# names come first (an "H100 PCIe" is an "H100" too)
PEAK_TFLOPS = (
    ("gb200", 2500.0),
    ("b200", 2250.0),
    ("gh200", 989.4),
    ("h200", 989.4),
    ("h100 pcie", 756.0),
    ("h100 nvl", 835.5),
    ("h100", 989.4),
    ("a100", 312.0),
    ("l40s", 362.1),
    ("l40", 181.0),
    ("l4", 121.0),
    ("v100", 125.0),
    ("t4", 65.0),
    ("mi300x", 1307.4),
    ("tpu v6e", 918.0),
    ("tpu v5p", 459.0),
    ("tpu v5e", 197.0),
    ("tpu v5litepod", 197.0),
    ("tpu v4", 275.0),
    ("tpu v3", 123.0),
)


def device_name(device) -> str | None:
    """What the device calls itself: a CUDA device's name, `TPU <type>` for a TPU; None elsewhere (a CPU, XLA's CPU
    device), whose peak the table does not hold."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "xla":
        import torch_xla.runtime as xr

        if xr.device_type() == "TPU":
            from torch_xla._internal import tpu

            return f"TPU {tpu.get_tpu_type()}"
    return None


def peak_tflops(name: str | None) -> float | None:
    """The table's peak for a device named `name`, or None where it has none."""
    lowered = (name or "").lower()
    return next((peak for part, peak in PEAK_TFLOPS if part in lowered), None)
