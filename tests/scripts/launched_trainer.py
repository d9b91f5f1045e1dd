"""Run under `accelerate launch --use_deepspeed` or `--use_fsdp`: an Accelerator, TrainingArguments, a Trainer.

    launched_trainer.py OUTPUT_DIR accelerator_first|trainer_only

What a DeepSpeed or FSDP user's script does with its `Accelerator` made before the arguments (the case the patch
changes), or the same script with no `Accelerator` of its own (nothing to reset, to compare with). Each rank writes
rank<N>.json: whether the arguments kept the state, the lines they logged, and how the `Trainer` ended (steps,
wrapper, kind, precision and loss, or the error).
"""

import json
import os
import sys
from pathlib import Path

from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs
from fsdp_on_cpu import build_fsdp_on_cpu
from launched_exit import exit_after_report
from transformers import Trainer, TrainingArguments, set_seed
from transformers.testing_utils import CaptureLogger, LoggingLevel
from transformers.utils import logging

from tests.testing_utils import TinyRegression, regression_dataset

output_dir, order = sys.argv[1:3]
if os.environ.get("ACCELERATE_USE_FSDP") == "true":
    build_fsdp_on_cpu()
bf16 = os.environ.get("ACCELERATE_MIXED_PRECISION") == "bf16"


accelerator = None
if order == "accelerator_first":
    # a CPU-only host: gloo, named (else accelerate counts one process per rank and DeepSpeed's batch check fails)
    accelerator = Accelerator(kwargs_handlers=[InitProcessGroupKwargs(backend="gloo")])
    kind = accelerator.distributed_type.value
# the arguments' and the `Trainer`'s lines, INFO included (a state that holds a plugin is not reused: an INFO line)
with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger("transformers")) as logged:
    args = TrainingArguments(
        output_dir=output_dir,
        report_to="none",
        max_steps=3,
        per_device_train_batch_size=2,
        ddp_backend="gloo",
        save_strategy="no",
        bf16=bf16,
        use_cpu=bf16,  # bf16 arguments on a CPU-only host need it
    )
    report = {"rank": args.process_index}
    if accelerator is not None:
        report.update(type=kind, kept=hasattr(accelerator.state, "distributed_type"))
    set_seed(0)  # the same initial weights and data order in both programs, whatever ran before
    try:
        trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
        result = trainer.train()
        state = trainer.accelerator.state
        report["trained"] = (
            f"{result.global_step} steps/{type(trainer.model_wrapped).__name__}/{state.distributed_type.value}/"
            f"{state.mixed_precision}/loss {result.training_loss:.6f}"
        )
    except Exception as error:  # the outcome is what is compared
        report["trained"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
report["logged"] = [line for line in logged.out.splitlines() if "Accelerator`'s state" in line]
Path(output_dir, f"rank{report['rank']}.json").write_text(json.dumps(report))
exit_after_report()
