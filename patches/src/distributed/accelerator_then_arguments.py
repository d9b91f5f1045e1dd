# Copyright 2026 The HuggingFace Team. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""#35702's program under `accelerate launch`: an `Accelerator`, then `HfArgumentParser(TrainingArguments)`, then a
`Trainer`. Each rank writes `rank<N>.json` into the output dir: the state after the arguments, the `Trainer`'s
state, its steps, and the reset lines it logged (INFO included)."""

import json
import os

import torch
from accelerate import Accelerator

from transformers import HfArgumentParser, LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments
from transformers.testing_utils import CaptureLogger, LoggingLevel
from transformers.utils import logging


accelerator = Accelerator()
with LoggingLevel(logging.INFO), CaptureLogger(logging.get_logger("transformers")) as cl:
    (args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    kept = hasattr(accelerator.state, "distributed_type")
    # a tiny model from its config: layers FSDP and DeepSpeed can shard, no download
    config = LlamaConfig(
        vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    tokens = torch.randint(0, config.vocab_size, (32, 8), generator=torch.Generator().manual_seed(0))
    dataset = [{"input_ids": ids, "labels": ids} for ids in tokens]
    trainer = Trainer(LlamaForCausalLM(config), args, train_dataset=dataset)
    result = trainer.train()
report = {
    "kept_by_arguments": kept,
    "distributed_type": trainer.accelerator.state.distributed_type.value,
    "global_step": result.global_step,
    "reset_lines": [line for line in cl.out.splitlines() if "Resetting an earlier `Accelerator`'s state" in line],
}
with open(os.path.join(args.output_dir, f"rank{args.process_index}.json"), "w", encoding="utf-8") as f:
    json.dump(report, f)
accelerator.end_training()  # the process group goes before the interpreter: its threads would abort the exit
