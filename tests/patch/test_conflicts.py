"""A state that differs from what is set up: the arguments compare its `PartialState` (device, processes), the
`Trainer` the rest with the `Accelerator` it creates. `auto` resets it with one line, `preserve` keeps it as it is
(accelerate refuses another precision for it), `reset` discards it at the arguments, silently."""

import unittest
from unittest.mock import PropertyMock, patch

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import DynamoBackend, TorchDynamoPlugin, is_compiled_module
from parameterized import parameterized
from transformers import Trainer, TrainingArguments
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

# (name, Accelerator kwargs, TrainingArguments kwargs, what the line names); every state is a CPU one, on any host
CONFLICTS = [
    ("state_bf16_args_no", {"mixed_precision": "bf16"}, {}, "its `mixed_precision` is `bf16`, this `Trainer`'s `no`"),
    (
        "state_no_args_bf16",
        {"mixed_precision": "no"},
        {"bf16": True},
        "its `mixed_precision` is `no`, this `Trainer`'s `bf16`",
    ),
    (
        "state_compiles",
        {"dynamo_backend": "eager"},
        {},
        "its `dynamo_plugin.backend` is `EAGER`, this `Trainer`'s `NO`",
    ),
    (
        "args_compile",
        {},
        {"torch_compile_backend": "eager"},
        "its `dynamo_plugin.backend` is `NO`, this `Trainer`'s `EAGER`",
    ),
    (
        "other_mode",
        {"dynamo_plugin": TorchDynamoPlugin(backend="eager", mode="reduce-overhead")},
        {"torch_compile_backend": "eager"},
        "its `dynamo_plugin.mode` is `reduce-overhead`, this `Trainer`'s `default`",
    ),
]


def state_lines(logged):
    """The lines about an accelerator state (arguments that compile also say compiling is faster on GPUs)."""
    return [line for line in logged.out.splitlines() if RESET_WARNING in line]


class GraphBreakRegression(TinyRegression):
    def forward(self, input_x, labels=None):
        torch._dynamo.graph_break()
        return super().forward(input_x, labels)


class ConflictTest(AccelerateStateTestCase):
    def trainer(self, policy=None, model=None, **args_kwargs):
        args = make_training_args(self.output_dir, policy, use_cpu=True, **{"max_steps": 2, **args_kwargs})
        return Trainer(model=model or TinyRegression(), args=args, train_dataset=regression_dataset())

    @parameterized.expand(CONFLICTS)
    def test_auto_resets_with_one_line_and_trains_as_asked(self, _, state_kwargs, args_kwargs, named):
        plugin = Accelerator(cpu=True, **state_kwargs).state.dynamo_plugin
        with capture_training_args_logs() as logged:
            trainer = self.trainer(**args_kwargs)
        if PATCHED:
            (line,) = state_lines(logged)
            self.assertIn(RESET_WARNING, line)
            self.assertIn(named, line)
        else:
            self.assertEqual(state_lines(logged), [])
        self.assertEqual(trainer.train().global_step, 2)
        self.assertEqual(trainer.accelerator.mixed_precision, "bf16" if args_kwargs.get("bf16") else "no")
        expected = DynamoBackend(args_kwargs.get("torch_compile_backend", "no").upper())
        self.assertEqual(trainer.accelerator.state.dynamo_plugin.backend, expected)
        self.assertIsNot(AcceleratorState._shared_state["dynamo_plugin"], plugin)  # a new state, not the user's

    @parameterized.expand(CONFLICTS)
    @bug_on_unpatched
    def test_preserve_keeps_the_state_as_it_is(self, _, state_kwargs, args_kwargs, named):
        plugin = Accelerator(cpu=True, **state_kwargs).state.dynamo_plugin
        try:
            self.trainer("preserve", **args_kwargs)
        except ValueError as error:  # accelerate's own refusal of another precision (5.x passes it)
            self.assertIn("already been initialized", str(error))
        self.assertIs(AcceleratorState._shared_state["dynamo_plugin"], plugin)

    @parameterized.expand(CONFLICTS)
    def test_reset_discards_it_silently_as_asked(self, _, state_kwargs, args_kwargs, named):
        accelerator = Accelerator(cpu=True, **state_kwargs)
        with capture_training_args_logs() as logged:
            make_training_args(self.output_dir, "reset", use_cpu=True, **args_kwargs)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertEqual(state_lines(logged), [])

    @parameterized.expand(
        [
            ("fullgraph", {"fullgraph": True}),
            ("dynamic", {"dynamic": True}),
            ("options", {"options": {"trace.enabled": False}}),
            ("regional", {"use_regional_compilation": True}),
            ("disable", {"disable": True}),
        ]
    )
    def test_every_torch_compile_setting_of_the_state(self, _, plugin_kwargs):
        # the `Trainer`'s `Accelerator` would take a kept plugin whole: every field must be what it passes
        Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="eager", **plugin_kwargs))
        with capture_training_args_logs() as logged:
            trainer = self.trainer(model=GraphBreakRegression(), torch_compile_backend="eager")
        self.assertEqual(RESET_WARNING in logged.out, PATCHED)
        self.assertEqual(trainer.accelerator.state.dynamo_plugin, TorchDynamoPlugin(backend="eager"))
        self.assertEqual(trainer.train().global_step, 2)  # `fullgraph` would refuse the graph break

    def test_second_trainer_asking_for_torch_compile_is_compiled(self):
        self.trainer(max_steps=1).train()
        trainer = self.trainer(torch_compile_backend="eager")
        trainer.train()
        self.assertTrue(is_compiled_module(trainer.model_wrapped))

    @unittest.skipUnless("parallelism_config" in TrainingArguments.__dataclass_fields__, "no `parallelism_config`")
    def test_parallelism_config_is_a_difference(self):
        from accelerate.parallelism_config import ParallelismConfig

        accelerator = Accelerator(cpu=True)
        seen = []

        def accelerator_of_the_trainer(**kwargs):
            seen.append(hasattr(accelerator.state, "distributed_type"))
            raise InterruptedError  # accelerate refuses a parallelism config on CPU processes: stop before

        args = make_training_args(self.output_dir, None, use_cpu=True, parallelism_config=ParallelismConfig())
        with LoggingLevel(logging.INFO), capture_training_args_logs() as logged, self.assertRaises(InterruptedError):
            with patch("transformers.trainer.Accelerator", accelerator_of_the_trainer):
                Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
        self.assertEqual(seen, [False])  # reset before its `Accelerator`, which would have ignored the config
        if PATCHED:
            self.assertIn("with `parallelism_config`, it cannot be reused", logged.out)


class DeviceConflictTest(AccelerateStateTestCase):
    """The arguments' own comparison: the `PartialState` they set up, against the one that exists."""

    @parameterized.expand([("auto",), ("reset",)])
    def test_cpu_state_where_an_accelerator_is_available(self, policy):
        # `Accelerator(cpu=True)` on a GPU machine, then arguments that do not ask for the CPU (mocked GPU)
        accelerator = Accelerator(cpu=True)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            with capture_training_args_logs() as logged:
                make_training_args(self.output_dir, policy)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        if PATCHED and policy == "auto":
            (line,) = logged.out.splitlines()
            self.assertIn("its `device` is `cpu`, these arguments' `cuda`", line)
        else:
            self.assertEqual(logged.out, "")

    @bug_on_unpatched
    def test_preserve_keeps_a_state_on_another_device(self):
        accelerator = Accelerator(cpu=True)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            args = make_training_args(self.output_dir, "preserve")
        self.assertEqual(args.device.type, "cpu")  # the state's, as `use_configured_state` gives
        self.assertEqual(accelerator.device.type, "cpu")

    def test_cpu_state_kept_where_the_cpu_is_all_there_is(self):
        accelerator = Accelerator(cpu=True)
        make_training_args(self.output_dir, None)
        cpu_host = PartialState().default_device.type == "cpu" if PATCHED else False
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), cpu_host)

    def test_rebuilt_partial_state_logs_nothing(self):
        # what every `notebook_launcher` child meets: a `PartialState` that is not the one these arguments build
        make_training_args(self.output_dir, None)
        with patch.object(PartialState, "default_device", PropertyMock(return_value=torch.device("cuda"))):
            with capture_training_args_logs() as logged:
                make_training_args(self.output_dir, None)
        self.assertEqual(logged.out, "")

    @bug_on_unpatched
    def test_kept_accelerator_state_logs_nothing(self):
        accelerator = Accelerator(cpu=True)
        with capture_training_args_logs() as logged:
            make_training_args(self.output_dir, None, use_cpu=True)
            make_training_args(self.output_dir, None, use_cpu=True)
        self.assertEqual(logged.out, "")
        self.assertEqual(accelerator.device.type, "cpu")
