"""Run under `accelerate launch --use_deepspeed`: an Accelerator, then TrainingArguments, then a Trainer that trains.

    deepspeed_trainer.py OUTPUT_DIR

What a DeepSpeed user's script does when it makes its `Accelerator` first. Each rank writes rank<N>.json: whether the
arguments kept the state, the lines they logged, and how the `Trainer` ended (its steps and engine, or the error).
"""

import json
import sys
from pathlib import Path

from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs
from transformers import Trainer, TrainingArguments
from transformers.testing_utils import CaptureLogger
from transformers.utils import logging

from tests.testing_utils import TinyRegression, regression_dataset

output_dir = sys.argv[1]
# a CPU-only host: gloo, named (else accelerate counts one process per rank and DeepSpeed's batch check fails)
accelerator = Accelerator(kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])
report = {"type": accelerator.distributed_type.value, "rank": accelerator.process_index}
with CaptureLogger(logging.get_logger("transformers.training_args")) as logged:
    args = TrainingArguments(
        output_dir=output_dir, report_to="none", max_steps=2, per_device_train_batch_size=2, ddp_backend="gloo"
    )
report.update(kept=hasattr(accelerator.state, "distributed_type"), logged=logged.out.splitlines())
try:
    trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
    report["trained"] = f"{trainer.train().global_step} steps/{type(trainer.model_wrapped).__name__}"
except Exception as error:  # the outcome is what is compared
    report["trained"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
Path(output_dir, f"rank{report['rank']}.json").write_text(json.dumps(report))
