"""A state that contradicts the arguments: error, warning and reset, or warning, depending on the policy."""

import unittest
from unittest.mock import PropertyMock, patch

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DynamoBackend, TorchDynamoPlugin, is_compiled_module
from parameterized import parameterized
from transformers import Trainer, TrainingArguments

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

# (name, Accelerator kwargs, TrainingArguments kwargs, words the message must name)
CONFLICTS = [
    ("state_bf16_args_no", {"mixed_precision": "bf16", "cpu": True}, {"use_cpu": True}, ["`bf16`", "`no`"]),
    (
        "state_no_args_bf16",
        {"mixed_precision": "no", "cpu": True},
        {"use_cpu": True, "bf16": True},
        ["`no`", "`bf16`"],
    ),
    # a kept state would silently ignore the FSDP plugin the Trainer builds from the arguments
    (
        "args_fsdp",
        {"cpu": True},
        {"use_cpu": True, "fsdp": "full_shard"},
        ["a `Trainer` builds its own DeepSpeed or FSDP plugin"],
    ),
]


FIELDS = {"regional": "use_regional_compilation"}
VALUES = {"options": "{'trace.enabled': False}"}


class GraphBreakRegression(TinyRegression):
    def forward(self, input_x, labels=None):
        torch._dynamo.graph_break()
        return super().forward(input_x, labels)


class ConflictTest(AccelerateStateTestCase):
    def assert_state_discarded(self, policy, state_kwargs, args_kwargs):
        """An Accelerator, then arguments under `policy`: the state must be gone. Returns what was logged."""
        accelerator = Accelerator(**state_kwargs)
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, policy, **args_kwargs)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        return warnings

    @parameterized.expand(CONFLICTS)
    @bug_on_unpatched
    def test_preserve_raises_and_keeps_state(self, _, state_kwargs, args_kwargs, words):
        accelerator = Accelerator(**state_kwargs)
        with self.assertRaises(ValueError) as raised:
            make_training_args(self.output_dir, "preserve", **args_kwargs)
        for word in [*words, "accelerator_state_policy='reset'"]:
            self.assertIn(word, str(raised.exception))
        self.assertEqual(accelerator.state.mixed_precision, state_kwargs.get("mixed_precision", "no"))

    @parameterized.expand(CONFLICTS)
    def test_auto_warns_and_resets(self, _, state_kwargs, args_kwargs, words):
        warnings = self.assert_state_discarded("auto", state_kwargs, args_kwargs)
        if PATCHED:
            (line,) = [line for line in warnings.out.splitlines() if RESET_WARNING in line]  # one line
            for word in [*words, "`TrainingArguments`, which differ from it: "]:
                self.assertIn(word, line)

    @parameterized.expand(CONFLICTS)
    def test_reset_discards_silently_as_asked(self, _, state_kwargs, args_kwargs, words):
        # the published release discards it without a word too; with `reset` the user asked for it
        warnings = self.assert_state_discarded("reset", state_kwargs, args_kwargs)
        self.assertNotIn("state", warnings.out.lower())


class WhatWasThereTest(AccelerateStateTestCase):
    """Quiet unless an `Accelerator`'s state is discarded: a kept state and a rebuilt `PartialState` log nothing."""

    def test_rebuilt_partial_state_logs_nothing(self):
        # what every `notebook_launcher` child meets: a `PartialState` that is not the one these arguments build
        make_training_args(self.output_dir, None)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            with capture_training_args_logs() as warnings:
                make_training_args(self.output_dir, None)
        self.assertEqual(warnings.out, "")

    @bug_on_unpatched
    def test_kept_accelerator_state_logs_nothing(self):
        accelerator = Accelerator(cpu=True)
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, None, use_cpu=True)
            make_training_args(self.output_dir, None, use_cpu=True)
        self.assertEqual(warnings.out, "")
        self.assertEqual(accelerator.device.type, "cpu")


class CompileAndDeviceConflictTest(AccelerateStateTestCase):
    """Settings a kept state would silently override: `torch.compile`, the device, the parallelism config."""

    def assert_reset_with_warning(self, accelerator, warnings, *words):
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        if PATCHED and words:
            for word in [RESET_WARNING, *words]:
                self.assertIn(word, warnings.out)

    @parameterized.expand(
        [
            (
                "state_compiles",
                {"dynamo_backend": "eager"},
                {},
                "`dynamo_plugin.backend` is `EAGER`, not `NO`",
            ),
            (
                "args_compile",
                {},
                {"torch_compile_backend": "eager"},
                "`dynamo_plugin.backend` is `NO`, not `EAGER`",
            ),
            (
                "other_mode",
                {"dynamo_plugin": TorchDynamoPlugin(backend="eager", mode="reduce-overhead")},
                {"torch_compile_backend": "eager"},
                "`dynamo_plugin.mode` is `reduce-overhead`, not `default`",
            ),
        ]
    )
    def test_torch_compile_settings(self, _, state_kwargs, args_kwargs, *words):
        accelerator = Accelerator(cpu=True, **state_kwargs)
        with capture_training_args_logs() as warnings:
            args = make_training_args(self.output_dir, None, use_cpu=True, max_steps=1, **args_kwargs)
        self.assert_reset_with_warning(accelerator, warnings, *words)
        trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
        expected = DynamoBackend(args_kwargs.get("torch_compile_backend", "no").upper())
        self.assertEqual(trainer.accelerator.state.dynamo_plugin.backend, expected)

    @parameterized.expand(
        [
            ("fullgraph", {"fullgraph": True}),
            ("dynamic", {"dynamic": True}),
            ("options", {"options": {"trace.enabled": False}}),
            ("regional", {"use_regional_compilation": True}),
            ("disable", {"disable": True}),
        ]
    )
    def test_every_torch_compile_setting_of_the_state(self, field, plugin_kwargs):
        # the Trainer's `Accelerator` would take the kept plugin whole: every field must be what it would build
        accelerator = Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="eager", **plugin_kwargs))
        with capture_training_args_logs() as warnings:
            args = make_training_args(self.output_dir, None, use_cpu=True, max_steps=2, torch_compile_backend="eager")
        value = VALUES.get(field, plugin_kwargs[FIELDS.get(field, field)])
        self.assert_reset_with_warning(
            accelerator, warnings, f"`dynamo_plugin.{FIELDS.get(field, field)}` is `{value}`"
        )
        trainer = Trainer(model=GraphBreakRegression(), args=args, train_dataset=regression_dataset())
        self.assertEqual(trainer.accelerator.state.dynamo_plugin, TorchDynamoPlugin(backend="eager"))
        self.assertEqual(trainer.train().global_step, 2)  # `fullgraph` would refuse the graph break

    def test_a_plugin_other_than_the_trainers_is_a_difference_without_a_backend_too(self):
        # the `Trainer`'s `Accelerator` would take the kept plugin whole: it must be the one the `Trainer` builds
        accelerator = Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="no", fullgraph=True))
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, None, use_cpu=True)
        self.assert_reset_with_warning(accelerator, warnings, "`dynamo_plugin.fullgraph` is `True`, not `False`")

    @unittest.skipUnless(hasattr(TrainingArguments, "_torch_dynamo_plugin"), "the patched release's helper")
    def test_trainer_and_arguments_build_the_same_dynamo_plugin(self):
        for kwargs in ({}, {"torch_compile_backend": "eager", "torch_compile_mode": "reduce-overhead"}):
            args = make_training_args(self.output_dir, None, use_cpu=True, **kwargs)
            trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
            self.assertEqual(trainer.accelerator.state.dynamo_plugin, args._torch_dynamo_plugin())

    def test_second_trainer_asking_for_torch_compile_is_compiled(self):
        first = make_training_args(self.output_dir, None, use_cpu=True, max_steps=1)
        Trainer(model=TinyRegression(), args=first, train_dataset=regression_dataset()).train()
        second = make_training_args(self.output_dir, None, use_cpu=True, max_steps=1, torch_compile_backend="eager")
        trainer = Trainer(model=TinyRegression(), args=second, train_dataset=regression_dataset())
        trainer.train()
        self.assertTrue(is_compiled_module(trainer.model_wrapped))

    @parameterized.expand([("auto",), ("reset",)])
    def test_cpu_state_where_an_accelerator_is_available(self, policy):
        # `Accelerator(cpu=True)` on a GPU machine, then arguments that do not ask for the CPU: a kept state would run
        # on the CPU while the arguments' device says `cuda` (mocked: this machine has no GPU)
        accelerator = Accelerator(cpu=True)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            with capture_training_args_logs() as warnings:
                make_training_args(self.output_dir, policy)
        self.assert_reset_with_warning(
            accelerator, warnings, *(["`device` is `cpu`, not `cuda`"] if policy == "auto" else [])
        )

    @bug_on_unpatched
    def test_cpu_state_where_an_accelerator_is_available_with_preserve(self):
        accelerator = Accelerator(cpu=True)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            with self.assertRaisesRegex(ValueError, "`device` is `cpu`, not `cuda`"):
                make_training_args(self.output_dir, "preserve")
        self.assertEqual(accelerator.device.type, "cpu")

    def test_cpu_state_kept_where_the_cpu_is_all_there_is(self):
        accelerator = Accelerator(cpu=True)
        make_training_args(self.output_dir, None)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), PATCHED)

    @unittest.skipUnless(
        "parallelism_config" in TrainingArguments.__dataclass_fields__, "no `parallelism_config` field"
    )
    def test_parallelism_config(self):
        from accelerate.parallelism_config import ParallelismConfig

        accelerator = Accelerator(cpu=True)
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, None, use_cpu=True, parallelism_config=ParallelismConfig())
        self.assert_reset_with_warning(accelerator, warnings, "`parallelism_config`")
