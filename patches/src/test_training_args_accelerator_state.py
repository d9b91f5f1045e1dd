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
import subprocess
import sys
import unittest
from unittest.mock import patch

from parameterized import parameterized

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    TestCasePlus,
    get_torch_dist_unique_port,
    require_accelerate,
    require_torch,
)
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

    class GraphBreakRegression(TinyRegression):
        def forward(self, input_x, labels=None):
            torch._dynamo.graph_break()
            return super().forward(input_x, labels)

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


def require_torch_multi_process_cpu(test_case):
    # gloo runs several processes on any machine with torch.distributed
    available = is_torch_available() and torch.distributed.is_available()
    return unittest.skipUnless(available, "test requires torch.distributed")(test_case)


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

    @parameterized.expand([("reset", False), (" RESET ", False), ("", True)])
    def test_policy_from_environment(self, value, kept):
        # case and surrounding whitespace are ignored and an empty variable is unset; the field stays `None`, so
        # arguments derived later do not carry the environment's value
        accelerator = Accelerator()
        with patch.dict(os.environ, {"TRANSFORMERS_ACCELERATOR_STATE_POLICY": value}):
            args = self.make_args()
        self.assertIsNone(args.accelerator_state_policy)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), kept)

    def test_invalid_policy_from_environment_raises(self):
        with patch.dict(os.environ, {"TRANSFORMERS_ACCELERATOR_STATE_POLICY": "none"}):
            with self.assertRaisesRegex(ValueError, "`TRANSFORMERS_ACCELERATOR_STATE_POLICY` .* got 'none'"):
                self.make_args()

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
        self.assertIn("`torch.compile` `backend` is `EAGER`", cl.out)

    def test_every_torch_compile_setting_is_compared(self):
        # The `Trainer`'s `Accelerator` would take the kept plugin whole, here `fullgraph=True` on a model that
        # breaks its graph: the state is rebuilt and training works as with a fresh state
        from accelerate.utils import TorchDynamoPlugin

        accelerator = Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="eager", fullgraph=True))
        with CaptureLogger(training_args_logger) as cl:
            args = self.make_args(use_cpu=True, torch_compile_backend="eager", max_steps=2)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertIn("`torch.compile` `fullgraph` is `True` but `False`", cl.out)
        trainer = Trainer(model=GraphBreakRegression(), args=args, train_dataset=TinyRegressionDataset())
        self.assertEqual(trainer.train().global_step, 2)

    def test_partial_state_reset_does_not_blame_an_accelerator(self):
        self.make_args(use_cpu=True)
        with CaptureLogger(training_args_logger) as cl:
            self.make_args(use_cpu=True, accelerator_state_policy="reset")
        self.assertIn("it was a `PartialState` only", cl.out)

    @require_torch_multi_process_cpu
    def test_state_of_another_launch_is_not_kept(self):
        # Under a 2-process launch on a CPU machine, `Accelerator()` builds a single-process state; arguments with
        # `use_cpu=True` must get the 2-process state a fresh one would be, as they did before the policy existed
        port = get_torch_dist_unique_port()
        cmd = f"{sys.executable} -m torch.distributed.run --nproc_per_node 2 --master_port {port} {__file__}".split()
        env = self.get_env()
        env.update(GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1", OUTPUT_DIR=self.get_auto_remove_tmp_dir())
        result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        self.assertEqual(result.stdout.count("of 2: distributed"), 2)

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


if __name__ == "__main__":
    # Run by `test_state_of_another_launch_is_not_kept` under `torch.distributed.run`
    accelerator = Accelerator()
    args = TrainingArguments(output_dir=os.environ["OUTPUT_DIR"], report_to="none", use_cpu=True)
    assert args.world_size == 2 and args.parallel_mode.value == "distributed", (args.world_size, args.parallel_mode)
    assert PartialState().num_processes == 2 and PartialState().process_index == int(os.environ["RANK"])
    print(f"rank {args.process_index} of {args.world_size}: {args.parallel_mode.value}")
