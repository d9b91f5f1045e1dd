"""A state that contradicts the arguments: error, warning and reset, or warning, depending on the policy."""

import unittest
from unittest.mock import PropertyMock, patch

import torch
from accelerate import Accelerator, PartialState
from accelerate.utils import DynamoBackend, TorchDynamoPlugin, is_compiled_module
from parameterized import parameterized
from transformers import Trainer, TrainingArguments
from transformers.utils import logging

from tests.testing_utils import (
    PATCHED,
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
    ("args_fsdp", {"cpu": True}, {"use_cpu": True, "fsdp": "full_shard"}, ["`deepspeed` or `fsdp` is set"]),
]


FIELDS = {"regional": "use_regional_compilation"}


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
            self.assertEqual(warnings.out.count("Resetting the existing accelerator state"), 1)
            for word in ["Resetting the existing accelerator state", *words]:
                self.assertIn(word, warnings.out)

    @parameterized.expand(CONFLICTS)
    def test_reset_warns(self, _, state_kwargs, args_kwargs, words):
        warnings = self.assert_state_discarded("reset", state_kwargs, args_kwargs)
        if PATCHED:
            self.assertIn("Resetting the existing accelerator state", warnings.out)
        else:
            # the bug: the release discards the state without a word about it
            self.assertNotIn("state", warnings.out.lower())


class WhatWasThereTest(AccelerateStateTestCase):
    """The warnings name what the arguments found: an `Accelerator`'s state, or only a `PartialState`."""

    @bug_on_unpatched
    def test_reset_of_a_partial_state_does_not_blame_an_accelerator(self):
        make_training_args(self.output_dir, None, use_cpu=True)
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, "reset", use_cpu=True)
        self.assertIn("Resetting the existing accelerator state", warnings.out)
        self.assertIn("it was a `PartialState` only (no `Accelerator` existed)", warnings.out)
        self.assertNotIn("can no longer be used", warnings.out)

    @bug_on_unpatched
    def test_reset_of_an_accelerators_state_names_it(self):
        Accelerator(cpu=True)
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, "reset", use_cpu=True)
        self.assertIn("the `Accelerator` created before these `TrainingArguments` can no longer be used", warnings.out)

    @bug_on_unpatched
    def test_keeping_an_accelerators_state_says_once_what_later_accelerators_get(self):
        # the deliberate difference is never silent: a later `Accelerator(...)` shares the kept state
        logging.get_logger("transformers.training_args").warning_once.cache_clear()
        Accelerator(cpu=True)
        with capture_training_args_logs() as warnings:
            make_training_args(self.output_dir, None, use_cpu=True)
            make_training_args(self.output_dir, None, use_cpu=True)
        self.assertEqual(warnings.out.count("a later `Accelerator(...)` shares it"), 1)
        self.assertIn("accelerator_state_policy='reset'", warnings.out)


class CompileAndDeviceConflictTest(AccelerateStateTestCase):
    """Settings a kept state would silently override: `torch.compile`, the device, the parallelism config."""

    def assert_reset_with_warning(self, accelerator, warnings, *words):
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        if PATCHED:
            for word in ["Resetting the existing accelerator state", *words]:
                self.assertIn(word, warnings.out)

    @parameterized.expand(
        [
            ("state_compiles", {"dynamo_backend": "eager"}, {}, "`backend` is `EAGER`", "but `NO`"),
            ("args_compile", {}, {"torch_compile_backend": "eager"}, "`backend` is `NO`", "but `EAGER`"),
            (
                "other_mode",
                {"dynamo_plugin": TorchDynamoPlugin(backend="eager", mode="reduce-overhead")},
                {"torch_compile_backend": "eager"},
                "`mode` is `reduce-overhead`",
                "but `default`",
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
        self.assert_reset_with_warning(accelerator, warnings, f"`torch.compile` `{FIELDS.get(field, field)}` is")
        trainer = Trainer(model=GraphBreakRegression(), args=args, train_dataset=regression_dataset())
        self.assertEqual(trainer.accelerator.state.dynamo_plugin, TorchDynamoPlugin(backend="eager"))
        self.assertEqual(trainer.train().global_step, 2)  # `fullgraph` would refuse the graph break

    def test_compile_settings_unread_without_a_backend_are_no_conflict(self):
        # with backend `no` accelerate never compiles: the other fields of the plugin cannot matter
        accelerator = Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="no", fullgraph=True))
        make_training_args(self.output_dir, None, use_cpu=True)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), PATCHED)

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
            accelerator, warnings, *(["`device` is `cpu` but `cuda`"] if policy == "auto" else [])
        )

    @bug_on_unpatched
    def test_cpu_state_where_an_accelerator_is_available_with_preserve(self):
        accelerator = Accelerator(cpu=True)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            with self.assertRaisesRegex(
                ValueError, "`device` is `cpu` but `cuda` in a state built for these arguments"
            ):
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
