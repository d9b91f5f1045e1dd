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
from types import SimpleNamespace
from unittest.mock import patch

from parameterized import parameterized

from transformers import TrainingArguments, is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    TestCasePlus,
    get_torch_dist_unique_port,
    require_accelerate,
    require_optuna,
    require_torch,
)
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
RESET_WARNING = "Resetting the state of an `Accelerator` created before these `TrainingArguments`"

# (name, `Accelerator` kwargs, `TrainingArguments` kwargs, what the message names)
DIFFERENCES = [
    ("mixed_precision", {"mixed_precision": "bf16"}, {}, "`mixed_precision` is `bf16`, not `no`"),
    ("torch_compile", {"dynamo_backend": "eager"}, {}, "`dynamo_plugin.backend` is `EAGER`, not `NO`"),
    ("fsdp", {}, {"fsdp": "full_shard"}, "a `Trainer` builds its own DeepSpeed or FSDP plugin"),
]


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
        return TrainingArguments(output_dir=self.get_auto_remove_tmp_dir(), report_to="none", use_cpu=True, **kwargs)

    @parameterized.expand(
        [(maker, policy) for maker in ("accelerator", "partial_state") for policy in ("auto", "preserve", "reset")]
    )
    def test_matching_state(self, maker, policy):
        state = Accelerator(cpu=True).state if maker == "accelerator" else PartialState(cpu=True)
        device = state.__dict__["device"] = torch.device("cpu")  # equal, but only a kept shared dict still holds it
        with CaptureLogger(training_args_logger) as cl:
            self.make_args(accelerator_state_policy=policy)
        self.assertEqual(state.__dict__.get("device") is device, policy != "reset")
        self.assertEqual(cl.out, "")  # kept, or discarded as asked: nothing to say
        self.assertEqual(PartialState().distributed_type, DistributedType.NO)

    @parameterized.expand(DIFFERENCES)
    def test_differing_state_is_reset_with_one_line(self, _, state_kwargs, args_kwargs, message):
        accelerator = Accelerator(cpu=True, **state_kwargs)
        with CaptureLogger(training_args_logger) as cl:
            self.make_args(**args_kwargs)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        (line,) = [line for line in cl.out.splitlines() if RESET_WARNING in line]
        self.assertIn(message, line)

    @parameterized.expand(DIFFERENCES)
    def test_differing_state_with_preserve_raises_and_is_kept(self, _, state_kwargs, args_kwargs, message):
        accelerator = Accelerator(cpu=True, **state_kwargs)
        with self.assertRaises(ValueError) as raised:
            self.make_args(accelerator_state_policy="preserve", **args_kwargs)
        self.assertIn(message, str(raised.exception))
        self.assertIn("accelerator_state_policy='reset'", str(raised.exception))
        self.assertEqual(accelerator.state.mixed_precision, state_kwargs.get("mixed_precision", "no"))

    @parameterized.expand([("keep",), ("Preserve",), (None,)])
    def test_invalid_policy_raises(self, value):
        with self.assertRaisesRegex(ValueError, "`accelerator_state_policy` must be 'auto', 'preserve' or 'reset'"):
            self.make_args(accelerator_state_policy=value)

    @parameterized.expand([("no_state",), ("after_a_failed_try",)])
    def test_fresh_init(self, before):
        if before == "after_a_failed_try":
            # a stray `LOCAL_RANK` makes the initialization raise after storing part of the state
            with patch.dict(os.environ, {"LOCAL_RANK": "0"}), self.assertRaises(ValueError):
                TrainingArguments(output_dir=self.get_auto_remove_tmp_dir(), report_to="none")
        with CaptureLogger(training_args_logger) as cl:
            args = self.make_args()
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().num_processes, 1)
        self.assertEqual(cl.out, "")

    def test_trainer_builds_the_dynamo_plugin_the_arguments_compare(self):
        args = self.make_args(torch_compile_backend="eager", torch_compile_mode="reduce-overhead")
        trainer = Trainer(model=TinyRegression(), args=args, train_dataset=TinyRegressionDataset())
        self.assertEqual(trainer.accelerator.state.dynamo_plugin, args._torch_dynamo_plugin())

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

    def test_successive_arguments_with_other_settings(self):
        # A notebook that reruns its cell with another setting: each `Trainer` trains with the state its arguments
        # ask for, a changed setting gets a fresh state, an unchanged one keeps the state of the previous run
        for run, (bf16, learning_rate) in enumerate([(False, 1e-3), (True, 1e-3), (True, 1e-2)]):
            args = self.make_args(bf16=bf16, learning_rate=learning_rate, max_steps=2, per_device_train_batch_size=4)
            trainer = Trainer(model=TinyRegression(), args=args, train_dataset=TinyRegressionDataset())
            trainer.train()
            self.assertEqual(trainer.accelerator.state.mixed_precision, "bf16" if bf16 else "no", f"run {run}")
            self.assertEqual(trainer.state.global_step, 2)

    @require_optuna
    def test_hyperparameter_search(self):
        # Trials set their values on the same arguments, whose devices are set up once: each trains, and an
        # `Accelerator` made before keeps its state
        def hp_space(trial):
            return {"learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True), "max_steps": 2}

        accelerator = Accelerator(cpu=True)
        args = self.make_args(per_device_train_batch_size=4, eval_strategy="no")
        data = TinyRegressionDataset()
        trainer = Trainer(model_init=TinyRegression, args=args, train_dataset=data, eval_dataset=data)
        best = trainer.hyperparameter_search(backend="optuna", direction="minimize", hp_space=hp_space, n_trials=2)
        self.assertIsNotNone(best.objective)
        self.assertEqual(trainer.state.global_step, 2)
        self.assertEqual(accelerator.distributed_type, DistributedType.NO)

    @parameterized.expand([("tensor_parallel", 2), ("not_sharded", None)])
    def test_trainer_of_a_tensor_parallel_model_builds_a_fresh_state(self, _, tp_size):
        # The arguments cannot see the model: a state they kept that the model's tensor parallelism differs from
        # would be ignored by the `Trainer`'s `Accelerator`, so it is reset before
        accelerator = Accelerator(cpu=True)
        model = TinyRegression()
        if tp_size:
            model.tp_size = tp_size
            model.config = SimpleNamespace(distributed_config=SimpleNamespace(dp_size=1))  # as loaded with tp_plan
        seen = []

        def record_state(**kwargs):
            seen.append(
                (dict(AcceleratorState._shared_state), {"torch_tp_plugin", "parallelism_config"} & set(kwargs))
            )
            raise InterruptedError  # on CPU processes accelerate refuses a parallelism config: stop before it

        with patch("transformers.trainer.Accelerator", record_state), self.assertRaises(InterruptedError):
            Trainer(model=model, args=self.make_args(), train_dataset=TinyRegressionDataset())
        state, tensor_parallel = seen[0]
        self.assertFalse(tensor_parallel and tp_size is None)  # only a sharded model brings tensor parallelism
        # reset where the `Trainer` passes tensor parallelism, kept for the other model, as for no model
        self.assertEqual(bool(state), not tensor_parallel)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), not tensor_parallel)

    def test_accelerator_survives_trainer(self):
        accelerator = Accelerator(cpu=True)
        args = self.make_args(max_steps=2, per_device_train_batch_size=4)
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
