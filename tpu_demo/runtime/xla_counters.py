"""XLA graph compilations and device-to-host transfers, counted per phase of the run (train, eval, save).

Read from torch_xla's host-side metrics, so counting never syncs the device. Off XLA every count is None.
A lazy graph runs when the next batch is fetched or a value is read, so each `mark(phase)` charges everything since
the previous mark to `phase`: one training step is the time from the end of the previous step to the end of this one.
"""

from accelerate.utils import DistributedType


def counts() -> tuple[int, int]:
    """Compilations and device-to-host transfers so far in this process (XLA only)."""
    import torch_xla.debug.metrics as xla_metrics

    def calls(metric):
        data = xla_metrics.metric_data(metric)
        return data[0] if data else 0

    return calls("CompileTime"), calls("TransferFromDeviceTime")


class XlaCounters:
    def __init__(self, accelerator, warmup_steps: int):
        self.enabled = accelerator.distributed_type == DistributedType.XLA
        self.first_calls = {"train": warmup_steps}
        self.phases: dict[str, dict[str, int]] = {}
        self.last = counts() if self.enabled else (0, 0)

    def compilations(self):
        """Graphs compiled so far in this process; None off XLA."""
        return counts()[0] if self.enabled else None

    def mark(self, phase: str) -> None:
        if not self.enabled:
            return
        now = counts()
        compiled, transferred = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now
        record = self.phases.setdefault(phase, dict.fromkeys(self._keys(), 0))
        when = "first" if record["calls"] < self.first_calls.get(phase, 1) else "later"
        record["calls"] += 1
        record[f"compilations_{when}"] += compiled
        record[f"transfers_{when}"] += transferred

    @staticmethod
    def _keys():
        return ("calls", "compilations_first", "compilations_later", "transfers_first", "transfers_later")

    def summary(self):
        """Per phase: calls, and compilations and transfers of the first call (for `train`: of the warm-up steps)
        and of all later ones; None off XLA."""
        if not self.enabled:
            return None
        return {name: {"first_calls": self.first_calls.get(name, 1), **r} for name, r in self.phases.items()}
