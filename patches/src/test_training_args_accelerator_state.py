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
import os
from unittest.mock import patch

from parameterized import parameterized

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import CaptureLogger, TestCasePlus, require_accelerate, require_torch
from transformers.trainer_pt_utils import AcceleratorConfig
from transformers.utils import is_accelerate_available, logging


if is_torch_available():
    import torch
    from torch import nn

    from transformers import Trainer

    class TinyRegression(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(1, 1)

        def forward(self, input_x, labels=None):
            y = self.linear(input_x)
            return {"loss": nn.functional.mse_loss(y, labels), "logits": y}

    class TinyRegressionDataset(torch.utils.data.Dataset):
        def __init__(self, length=16):
            generator = torch.Generator().manual_seed(0)
            self.x = torch.randn(length, 1, generator=generator)
            self.y = 2 * self.x + 3

        def __len__(self):
            return len(self.x)

        def __getitem__(self, i):
            return {"input_x": self.x[i], "labels": self.y[i]}


if is_accelerate_available():
    from accelerate import Accelerator, PartialState
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType


training_args_logger = logging.get_logger("transformers.training_args")


@require_torch
@require_accelerate
class TrainingArgumentsAcceleratorStateTest(TestCasePlus):
    def setUp(self):
        super().setUp()
        # start from no state, whatever ran before in this process
        AcceleratorState._reset_state(reset_partial_state=True)

    def make_args(self, **kwargs):
        return TrainingArguments(output_dir=self.get_auto_remove_tmp_dir(), report_to="none", **kwargs)

    @parameterized.expand([("accelerator",), ("partial_state",)])
    def test_default_keeps_existing_state(self, maker):
        state = Accelerator().state if maker == "accelerator" else PartialState()
        state.__dict__["_kept"] = True  # lives in the shared borg dict, so a reset clears it
        self.make_args()
        self.assertTrue(state.__dict__.get("_kept"))
        self.assertEqual(state.distributed_type, DistributedType.NO)
        self.assertIsNotNone(state.device)

    @parameterized.expand([("auto", True), ("preserve", True), ("reset", False)])
    def test_policy_without_conflict(self, policy, kept):
        accelerator = Accelerator()
        with CaptureLogger(training_args_logger) as cl:
            args = self.make_args(accelerator_state_policy=policy)
        self.assertEqual(args.accelerator_state_policy, policy)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), kept)
        self.assertEqual("Resetting the existing accelerator state" in cl.out, not kept)

    @parameterized.expand([("auto",), ("reset",)])
    def test_conflict_resets_with_warning(self, policy):
        accelerator = Accelerator(mixed_precision="bf16", cpu=True)
        with CaptureLogger(training_args_logger) as cl:
            self.make_args(accelerator_state_policy=policy, use_cpu=True)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertIn("Resetting the existing accelerator state", cl.out)
        if policy == "auto":
            self.assertIn("mixed precision `bf16`", cl.out)

    def test_fsdp_arguments_get_a_fresh_state(self):
        # A kept state would silently ignore the FSDP plugin the `Trainer` builds from these arguments
        accelerator = Accelerator(cpu=True)
        with CaptureLogger(training_args_logger) as cl:
            self.make_args(use_cpu=True, fsdp="full_shard")
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertIn("`deepspeed` or `fsdp` is set", cl.out)

    def test_conflict_with_preserve_raises(self):
        accelerator = Accelerator(mixed_precision="bf16", cpu=True)
        with self.assertRaisesRegex(ValueError, "mixed precision `bf16` but these arguments ask for `no`"):
            self.make_args(accelerator_state_policy="preserve", use_cpu=True)
        self.assertEqual(accelerator.state.mixed_precision, "bf16")

    def test_invalid_policy_raises(self):
        with self.assertRaisesRegex(ValueError, "must be one of 'auto', 'preserve' or 'reset', got 'keep'"):
            self.make_args(accelerator_state_policy="keep")

    def test_policy_from_environment(self):
        accelerator = Accelerator()
        with patch.dict(os.environ, {"TRANSFORMERS_ACCELERATOR_STATE_POLICY": "reset"}):
            args = self.make_args()
        self.assertEqual(args.accelerator_state_policy, "reset")
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))

    @parameterized.expand([("auto",), ("preserve",), ("reset",)])
    def test_fresh_init(self, policy):
        with CaptureLogger(training_args_logger) as cl:
            args = self.make_args(accelerator_state_policy=policy, use_cpu=True)
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().distributed_type, DistributedType.NO)
        self.assertNotIn("Resetting", cl.out)

    def test_use_configured_state_requires_a_state(self):
        with self.assertRaisesRegex(ValueError, "requires a pre-configured"):
            self.make_args(accelerator_config={"use_configured_state": True}, accelerator_state_policy="reset")

    def test_reused_accelerator_config(self):
        # `use_configured_state` is consumed by the first arguments, as before; the default policy keeps the state
        # for the next arguments built from the same config, and `reset` still discards it
        accelerator = Accelerator()
        config = AcceleratorConfig(use_configured_state=True)
        self.make_args(accelerator_config=config)
        self.make_args(accelerator_config=config)
        self.assertEqual(accelerator.state.distributed_type, DistributedType.NO)
        self.make_args(accelerator_config=config, accelerator_state_policy="reset")
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))

    @parameterized.expand([("auto",), ("preserve",), ("reset",)])
    def test_incomplete_state_is_rebuilt(self, policy):
        # A stray `LOCAL_RANK` makes the first initialization raise after storing part of the state
        with patch.dict(os.environ, {"LOCAL_RANK": "0"}):
            with self.assertRaises(ValueError):
                self.make_args()
        with CaptureLogger(training_args_logger) as cl:
            args = self.make_args(accelerator_state_policy=policy, use_cpu=True)
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().num_processes, 1)
        self.assertIn("did not finish initializing", cl.out)

    def test_torch_compile_conflict_resets(self):
        # A kept state would compile the `Trainer`'s model with the backend of the `Accelerator` created first
        accelerator = Accelerator(cpu=True, dynamo_backend="eager")
        with CaptureLogger(training_args_logger) as cl:
            self.make_args(use_cpu=True)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertIn("`torch.compile` backend `eager`", cl.out)

    def test_hyperparameter_search_sequence(self):
        # Successive trials must each train with the state their arguments ask for: a changed setting gets a fresh
        # state, an unchanged one keeps the state of the previous trial.
        for trial, (bf16, learning_rate) in enumerate([(False, 1e-3), (True, 1e-3), (True, 1e-2)]):
            args = self.make_args(
                use_cpu=True, bf16=bf16, learning_rate=learning_rate, max_steps=2, per_device_train_batch_size=4
            )
            trainer = Trainer(model=TinyRegression(), args=args, train_dataset=TinyRegressionDataset())
            trainer.train()
            self.assertEqual(trainer.accelerator.state.mixed_precision, "bf16" if bf16 else "no", f"trial {trial}")
            self.assertEqual(trainer.state.global_step, 2)

    def test_accelerator_survives_trainer(self):
        accelerator = Accelerator(cpu=True)
        args = self.make_args(use_cpu=True, max_steps=2, per_device_train_batch_size=4)
        self.assertEqual(accelerator.distributed_type, DistributedType.NO)
        Trainer(model=TinyRegression(), args=args, train_dataset=TinyRegressionDataset()).train()
        model = TinyRegression()
        model, optimizer = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
        self.assertEqual(accelerator.distributed_type, DistributedType.NO)
