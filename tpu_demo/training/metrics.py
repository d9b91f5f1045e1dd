"""Where a run's figures go: the trackers (`report_to`) and `metrics.jsonl` in the output folder, one line a step."""

import contextlib
import json
import math
from pathlib import Path


class MetricsLog:
    def __init__(self, accelerator, output_dir):
        self.accelerator = accelerator
        self.path = Path(output_dir) / "metrics.jsonl"

    def log(self, metrics: dict, step: int) -> None:
        self.accelerator.log({k: v for k, v in metrics.items() if isinstance(v, float)}, step=step)
        if self.accelerator.is_main_process:
            with open(self.path, "a") as f:
                f.write(json.dumps({"step": step, **metrics}) + "\n")

    def forget_after(self, step: int) -> list[float]:
        """A resumed run runs the steps after its checkpoint again: their earlier lines leave metrics.jsonl, which
        then reads as one run (a line torn by the interruption goes too). Returns the training losses logged up to
        `step`. Main process only."""
        if not self.path.is_file():
            return []
        kept = []  # (line, record)
        for line in self.path.read_text().splitlines(keepends=True):
            with contextlib.suppress(json.JSONDecodeError):  # a torn line does not parse
                record = json.loads(line)
                if record.get("step", math.inf) <= step:
                    kept.append((line, record))
        self.path.write_text("".join(line for line, _ in kept))
        return [record["loss"] for _, record in kept if "loss" in record]
