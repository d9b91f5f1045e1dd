"""XLA graph compilations and device-to-host transfers, counted per phase of the run (train, eval, save).

Read from torch_xla's host-side metrics, so counting never syncs the device. Off XLA every count is None.
A lazy graph runs when the next batch is fetched or a value is read, so each `mark(phase)` charges everything since
the previous mark to `phase`: one training step is the time from the end of the previous step to the end of this one.
Batches of several shapes (`length_buckets`) compile a graph each, as do a step that logs and a micro-batch that does
not sync: the caller names the graphs a mark ran (`graphs`), and a mark counts as warm-up while it or the mark before
ran one not seen before (that one's graph runs late, at the next batch). So `compilations_later` counts only graphs
compiled again, and `shapes` what each batch shape (`text x frames`) compiled.
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
        self.seen: dict[str, set] = {}  # phase: the graphs its marks named
        self.new_before: dict[str, bool] = {}  # phase: whether its last mark named a new one
        self.last_phase = None
        self.last = counts() if self.enabled else (0, 0)

    def compilations(self):
        """Graphs compiled so far in this process; None off XLA."""
        return counts()[0] if self.enabled else None

    def mark(self, phase: str, graphs=(), shape=None) -> None:
        """Charges what happened since the last mark to `phase`: `graphs`, hashable names of the graphs run since
        (e.g. a batch's shape and whether it synced), and `shape`, the batch shape it is counted under."""
        if not self.enabled:
            return
        now = counts()
        compiled, transferred = now[0] - self.last[0], now[1] - self.last[1]
        self.last = now
        record = self.phases.setdefault(phase, dict.fromkeys(self._keys(), 0))
        if self.last_phase not in (phase, None):  # the first call after another phase starts from what that left
            graphs = [(*graph, "after", self.last_phase) for graph in graphs]
        self.last_phase = phase
        seen = self.seen.setdefault(phase, set())
        new = bool(set(graphs) - seen)
        seen.update(graphs)
        warming = record["calls"] < self.first_calls.get(phase, 1) or new or self.new_before.get(phase, False)
        self.new_before[phase] = new
        when = "first" if warming else "later"
        record["calls"] += 1
        record["calls_later"] += when == "later"
        record[f"compilations_{when}"] += compiled
        if when == "later" and compiled:  # a graph compiled again: which call, after which graphs (the first 5)
            recompiled = record.setdefault("recompiled", [])
            recompiled += [{"call": record["calls"], "graphs": [list(g) for g in graphs]}][: 5 - len(recompiled)]
        record[f"transfers_{when}"] += transferred
        if shape is not None:
            keys = ("calls", "compilations_first", "compilations_later")
            per_shape = record.setdefault("shapes", {}).setdefault("x".join(map(str, shape)), dict.fromkeys(keys, 0))
            per_shape["calls"] += 1
            per_shape[f"compilations_{when}"] += compiled

    @staticmethod
    def _keys():
        return (
            "calls",
            "calls_later",
            "compilations_first",
            "compilations_later",
            "transfers_first",
            "transfers_later",
        )

    def summary(self):
        """Per phase: calls, and compilations and transfers of the first call (for `train`: of the warm-up steps)
        and of all later ones, and the same per batch shape (`text x frames`); None off XLA."""
        if not self.enabled:
            return None
        return {name: {"first_calls": self.first_calls.get(name, 1), **r} for name, r in self.phases.items()}
