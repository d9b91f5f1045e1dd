"""What the comparison cannot show equal resets the state as published, and only a state the user made is told.

The arguments keep a state whose `PartialState` is the one they set up; the `Trainer` then keeps it only where its
mixed precision and dynamo plugin are what its `Accelerator` asks for and it holds nothing else: a plugin a launch or
a library set, a device mesh, a key of a future accelerate is a difference.
"""

import os
from unittest.mock import patch

from accelerate import Accelerator
from accelerate.state import AcceleratorState
from parameterized import parameterized
from transformers import Trainer

from tests.testing_utils import (
    PATCHED,
    RESET_WARNING,
    AccelerateStateTestCase,
    TinyRegression,
    bug_on_unpatched,
    capture_training_args_logs,
    make_training_args,
    regression_dataset,
)

# keys accelerate 1.15 sets on an `AcceleratorState` for DeepSpeed, FSDP, Megatron-LM, tensor and n-D parallelism,
# and one it may set in a later release
UNMODELLED = [
    ("deepspeed_plugins", {"default": "a DeepSpeedPlugin"}),
    ("fsdp_plugin", "a FullyShardedDataParallelPlugin"),
    ("megatron_lm_plugin", "a MegatronLMPlugin"),
    ("torch_tp_plugin", "a TorchTensorParallelPlugin"),
    ("device_mesh", "a DeviceMesh"),
    ("ds_device_mesh", "a DeviceMesh"),
    ("future_plugin", "anything"),
]


class FailSafeTest(AccelerateStateTestCase):
    def accelerator_with(self, key, value, **kwargs):
        accelerator = Accelerator(cpu=True, **kwargs)
        AcceleratorState._shared_state[key] = value
        return accelerator

    def trainer(self, policy=None, **kwargs):
        args = make_training_args(self.output_dir, policy, use_cpu=True, max_steps=1, **kwargs)
        return Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())

    @parameterized.expand(UNMODELLED)
    def test_a_setting_the_comparison_does_not_model_resets_with_one_line(self, key, value):
        accelerator = self.accelerator_with(key, value)
        with capture_training_args_logs() as logged:
            trainer = self.trainer()
        self.assertIsNone(AcceleratorState._shared_state.get(key))  # a fresh state has none
        self.assertIs(accelerator.state.dynamo_plugin, trainer.accelerator.state.dynamo_plugin)
        if PATCHED:
            (line,) = logged.out.splitlines()
            self.assertIn(RESET_WARNING, line)
            self.assertIn(f"`{key}`", line)
        self.assertEqual(trainer.train().global_step, 1)

    @parameterized.expand(UNMODELLED)
    @bug_on_unpatched
    def test_a_setting_the_comparison_does_not_model_is_named_by_preserve(self, key, value):
        accelerator = self.accelerator_with(key, value)
        with self.assertRaisesRegex(ValueError, f"`{key}`"):
            self.trainer("preserve")
        self.assertEqual(accelerator.state.__dict__[key], value)

    @parameterized.expand([("unset", None), ("set", "1")])
    def test_tpu_bf16_downcast_is_a_difference(self, _, variable):
        # on a TPU with bf16, accelerate sets `downcast_bfloat` (from ACCELERATE_DOWNCAST_BF16): not compared, reset
        accelerator = self.accelerator_with("downcast_bfloat", bool(variable), mixed_precision="bf16")
        with patch.dict(os.environ, {"ACCELERATE_DOWNCAST_BF16": variable} if variable else {}):
            trainer = self.trainer(bf16=True)
        self.assertNotIn("downcast_bfloat", AcceleratorState._shared_state)
        self.assertEqual(accelerator.mixed_precision, trainer.accelerator.mixed_precision)

    def test_a_previous_trainers_state_is_replaced_quietly(self):
        # a notebook: the first `Trainer` ran in fp32, the next arguments ask for bf16; the user created no
        # `Accelerator`, so there is nothing to tell them (the published release is silent too)
        first = make_training_args(self.output_dir, None, use_cpu=True, max_steps=1)
        Trainer(model=TinyRegression(), args=first, train_dataset=regression_dataset()).train()
        with capture_training_args_logs() as logged:
            second = make_training_args(self.output_dir, None, use_cpu=True, max_steps=1, bf16=True)
        self.assertEqual(logged.out, "")
        trainer = Trainer(model=TinyRegression(), args=second, train_dataset=regression_dataset())
        self.assertEqual(trainer.train().global_step, 1)
        self.assertEqual(trainer.accelerator.mixed_precision, "bf16")
