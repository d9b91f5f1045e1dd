"""What the comparison does not model resets the state as published, and only an `Accelerator`'s loss is told.

The patched release keeps a state only where every key is what these arguments, and a `Trainer` using them, would
create; a key it does not compare (a plugin a launch or a library set, a key of a future accelerate) is a difference.
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

# keys accelerate 1.15 sets on an `AcceleratorState` for DeepSpeed, Megatron-LM, tensor and n-D parallelism, and
# one it may set in a later release
UNMODELLED = [
    ("deepspeed_plugins", {"default": "a DeepSpeedPlugin"}),
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

    @parameterized.expand(UNMODELLED)
    def test_a_setting_the_comparison_does_not_model_resets_with_one_line(self, key, value):
        accelerator = self.accelerator_with(key, value)
        with capture_training_args_logs() as logged:
            make_training_args(self.output_dir, None, use_cpu=True)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        if PATCHED:
            (line,) = logged.out.splitlines()
            self.assertIn(RESET_WARNING, line)
            self.assertIn(f"`{key}` is `", line)

    @parameterized.expand(UNMODELLED)
    @bug_on_unpatched
    def test_a_setting_the_comparison_does_not_model_is_named_by_preserve(self, key, value):
        accelerator = self.accelerator_with(key, value)
        with self.assertRaisesRegex(ValueError, f"`{key}` is `"):
            make_training_args(self.output_dir, "preserve", use_cpu=True)
        self.assertEqual(accelerator.state.__dict__[key], value)

    @parameterized.expand([("unset", None, True), ("set", "1", False)])
    def test_tpu_bf16_downcast_is_compared_with_the_variable(self, _, variable, kept):
        # on a TPU with bf16, accelerate derives `downcast_bfloat` from ACCELERATE_DOWNCAST_BF16
        accelerator = self.accelerator_with("downcast_bfloat", False, mixed_precision="bf16")
        with patch.dict(os.environ, {"ACCELERATE_DOWNCAST_BF16": variable} if variable else {}):
            make_training_args(self.output_dir, None, use_cpu=True, bf16=True)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), kept and PATCHED)

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
