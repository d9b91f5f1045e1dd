"""Run under `accelerate launch`: builds an Accelerator, then TrainingArguments, and reports each rank's state."""

import json
import sys
from pathlib import Path

from accelerate import Accelerator
from transformers import TrainingArguments


def describe(accelerator):
    state = accelerator.state
    if not hasattr(state, "distributed_type"):
        return None
    return {"type": str(state.distributed_type), "rank": state.process_index, "world": state.num_processes}


accelerator = Accelerator()
before = describe(accelerator)
TrainingArguments(output_dir=sys.argv[1], report_to="none")
after = describe(accelerator)
if after:
    accelerator.wait_for_everyone()  # the process group still works
# One file per rank: torchrun interleaves the ranks' stdout.
Path(sys.argv[1], f"rank{before['rank']}.json").write_text(json.dumps({"before": before, "after": after}))
