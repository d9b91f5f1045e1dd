"""Run under `accelerate launch`: builds an Accelerator, then TrainingArguments, and reports each rank's state.

    multiprocess_state.py OUTPUT_DIR [keep|end_training|ddp_timeout]

`end_training` destroys the process group before the arguments are built; `ddp_timeout` asks for a timeout that an
existing process group cannot take any more.
"""

import json
import os
import sys
from pathlib import Path

from accelerate import Accelerator, PartialState
from transformers import TrainingArguments


def describe(accelerator):
    state = accelerator.state
    if not hasattr(state, "distributed_type"):
        return None
    return {"type": str(state.distributed_type), "rank": state.process_index, "world": state.num_processes}


output_dir, mode = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "keep"
accelerator = Accelerator()
before = describe(accelerator)
if mode == "end_training":
    accelerator.end_training()  # destroys the process group
    # A new rendezvous needs a store of its own: torchrun's still holds the first group's keys, which torch reuses.
    os.environ["TORCHELASTIC_USE_AGENT_STORE"] = "False"
    os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 1)
extra = {"ddp_timeout": 600} if mode == "ddp_timeout" else {}
TrainingArguments(output_dir=output_dir, report_to="none", **extra)
after = describe(accelerator)
PartialState().wait_for_everyone()  # whatever happened to the state, the processes still talk
# One file per rank: torchrun interleaves the ranks' stdout.
Path(output_dir, f"rank{before['rank']}.json").write_text(json.dumps({"before": before, "after": after}))
