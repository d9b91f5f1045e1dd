"""What the `Trainer` cannot show equal resets the state as published, with a line that says so, not that it differs.

The arguments keep an `Accelerator`'s state whose `PartialState` is the one they set up; the `Trainer` then keeps it
only where its mixed precision and dynamo plugin are what its `Accelerator` asks for and neither holds a plugin
(DeepSpeed, FSDP, Megatron-LM, tensor parallelism, a `ParallelismConfig`). Settings that follow from those (the TPU's
`downcast_bfloat` from the mixed precision) are not differences.
"""

import os
from unittest.mock import patch

from accelerate import Accelerator
from accelerate.state import AcceleratorState
from parameterized import parameterized
from transformers import Trainer
from transformers.testing_utils import LoggingLevel
from transformers.utils import logging

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

# the keys accelerate 1.15 sets on an `AcceleratorState` for DeepSpeed, FSDP, Megatron-LM, tensor and n-D parallelism
PLUGINS = [
    ("deepspeed_plugins", {"default": "a DeepSpeedPlugin"}),
    ("fsdp_plugin", "a FullyShardedDataParallelPlugin"),
    ("megatron_lm_plugin", "a MegatronLMPlugin"),
    ("torch_tp_plugin", "a TorchTensorParallelPlugin"),
    ("parallelism_config", "a ParallelismConfig"),
]


class FailSafeTest(AccelerateStateTestCase):
    def accelerator_with(self, key, value, **kwargs):
        accelerator = Accelerator(cpu=True, **kwargs)
        AcceleratorState._shared_state[key] = value
        return accelerator

    def trainer(self, policy=None, **kwargs):
        args = make_training_args(self.output_dir, policy, use_cpu=True, max_steps=1, **kwargs)
        return Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())

    @parameterized.expand(PLUGINS)
    def test_a_state_holding_a_plugin_is_reset_with_an_info_line(self, key, value):
        accelerator = self.accelerator_with(key, value)
        with LoggingLevel(logging.INFO), capture_training_args_logs() as logged:
            trainer = self.trainer()
        self.assertIsNone(AcceleratorState._shared_state.get(key))  # a fresh state has none
        self.assertIs(accelerator.state.dynamo_plugin, trainer.accelerator.state.dynamo_plugin)
        if PATCHED:
            (line,) = [line for line in logged.out.splitlines() if RESET_WARNING in line]
            self.assertIn(f"with `{key}`, it cannot be reused", line)
            self.assertNotIn("differ", line)
        self.assertEqual(trainer.train().global_step, 1)

    @parameterized.expand([("unset", None), ("set", "1")])
    @bug_on_unpatched
    def test_tpu_bf16_downcast_follows_the_mixed_precision(self, _, variable):
        # on a TPU with bf16, accelerate sets `downcast_bfloat` (from ACCELERATE_DOWNCAST_BF16): an equal bf16 state
        # is kept with it
        if not hasattr(Trainer, "_build_accelerator_args"):
            # 4.x passes no mixed precision, and accelerate refuses `downcast_bf16` then, but on a TPU's XLA state
            self.skipTest("this stand-in state is not an XLA one: 4.x's Trainer cannot take it")
        accelerator = self.accelerator_with("downcast_bfloat", bool(variable), mixed_precision="bf16")
        plugin = accelerator.state.dynamo_plugin
        with patch.dict(os.environ, {"ACCELERATE_DOWNCAST_BF16": variable} if variable else {}):
            with capture_training_args_logs() as logged:
                trainer = self.trainer(bf16=True)
        self.assertIs(AcceleratorState._shared_state.get("dynamo_plugin"), plugin)
        self.assertEqual(AcceleratorState._shared_state.get("downcast_bfloat"), bool(variable))
        self.assertEqual(trainer.accelerator.mixed_precision, "bf16")
        self.assertEqual(logged.out, "")

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
