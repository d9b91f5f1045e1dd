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
import copy
import json
import os
from unittest.mock import PropertyMock, patch

from parameterized import parameterized

from transformers import HfArgumentParser, TrainingArguments, is_torch_available
from transformers.testing_utils import (
    CaptureLogger,
    LoggingLevel,
    TestCasePlus,
    require_accelerate,
    require_optuna,
    require_torch,
    require_torch_accelerator,
)
from transformers.utils import is_accelerate_available, logging


if is_torch_available():
    import torch

    from transformers import Trainer

    from .trainer_test_utils import (
        RegressionDataset,
        RegressionModelConfig,
        RegressionPreTrainedModel,
        get_regression_trainer,
    )

    class BF16Trainer(Trainer):
        # passes its own mixed precision to its `Accelerator`, whatever its arguments say (5.x builds them in a method)
        def _build_accelerator_args(self, **kwargs):
            return {**super()._build_accelerator_args(**kwargs), "mixed_precision": "bf16"}

    class OwnAcceleratorTrainer(Trainer):
        # builds its own `Accelerator` without calling the base method, as some subclasses do
        def create_accelerator_and_postprocess(self):
            self.accelerator = Accelerator(cpu=True, mixed_precision="bf16" if self.args.bf16 else "no")
            self.gather_function = self.accelerator.gather_for_metrics
            self.is_deepspeed_enabled = self.is_fsdp_enabled = self.is_tp_enabled = False


if is_accelerate_available():
    from accelerate import Accelerator, ParallelismConfig, PartialState, notebook_launcher
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType, GradientAccumulationPlugin, TorchDynamoPlugin


def capture_logs():
    """What `TrainingArguments` and the `Trainer` log, together."""
    return CaptureLogger(logging.get_logger("transformers"))


def state_lines(captured):
    """The lines about the accelerator state, without what else a `Trainer` may say."""
    return [line for line in captured.out.splitlines() if "Accelerator`'s state" in line]


@require_torch
@require_accelerate
class TrainingArgumentsAcceleratorStateTest(TestCasePlus):
    # Every state here is a CPU state, made so on any host (`cpu=True` with `use_cpu=True`)
    def make_args(self, **kwargs):
        return TrainingArguments(self.get_auto_remove_tmp_dir(), report_to="none", use_cpu=True, **kwargs)

    def trainer_on(self, args, trainer_class=None):
        """A `Trainer` (or `trainer_class`) of the regression model on `args`."""
        trainer_class = trainer_class or Trainer
        return trainer_class(
            RegressionPreTrainedModel(RegressionModelConfig()), args, train_dataset=RegressionDataset()
        )

    def skip_unless_the_trainer_builds_its_accelerator_args(self):
        if not hasattr(Trainer, "_build_accelerator_args"):
            self.skipTest("this `Trainer` builds its `Accelerator`'s arguments inline")

    def make_trainer(self, **kwargs):
        return get_regression_trainer(
            output_dir=self.get_auto_remove_tmp_dir(), report_to="none", use_cpu=True, max_steps=2, **kwargs
        )

    def test_existing_state_is_kept(self):
        accelerator = Accelerator(cpu=True)
        device = accelerator.state.device
        with capture_logs() as cl:
            self.make_args()
        self.assertEqual(accelerator.state.distributed_type, DistributedType.NO)
        self.assertIs(accelerator.state.device, device)  # the very state, not an equal new one
        self.assertIs(PartialState().device, device)
        self.assertEqual(state_lines(cl), [])

    def test_state_of_an_accelerator_that_found_the_cpu_is_kept(self):
        # `Accelerator()` on a host whose only device is the CPU, then arguments that ask for it (`use_cpu=True`)
        with patch.object(PartialState, "default_device", new_callable=PropertyMock, return_value=torch.device("cpu")):
            accelerator = Accelerator()
        device = accelerator.state.device
        with capture_logs() as cl:
            self.make_args()
        self.assertIs(accelerator.state.device, device)
        self.assertEqual(state_lines(cl), [])

    @parameterized.expand([("fsdp_plugin", "FSDP"), ("megatron_lm_plugin", "MEGATRON_LM")])
    def test_state_with_a_launched_plugin_is_kept_by_the_arguments_and_reset_by_the_trainer(self, key, kind):
        # an FSDP or Megatron-LM `AcceleratorState` writes its distributed type into the `PartialState`, as
        # `accelerate launch --use_fsdp` makes it do (set here by hand on one CPU process)
        accelerator = Accelerator(cpu=True)
        AcceleratorState._shared_state[key] = object()  # a stand-in plugin
        AcceleratorState._shared_state["distributed_type"] = DistributedType(kind)
        PartialState._shared_state["distributed_type"] = DistributedType(kind)
        args = self.make_args(max_steps=2)
        self.assertEqual(accelerator.state.distributed_type, DistributedType(kind))
        with LoggingLevel(logging.INFO), capture_logs() as cl:
            trainer = Trainer(
                RegressionPreTrainedModel(RegressionModelConfig()), args, train_dataset=RegressionDataset()
            )
        (line,) = state_lines(cl)
        self.assertIn(f"with `{key}`, it cannot be reused", line)
        self.assertEqual(trainer.accelerator.distributed_type, DistributedType.NO)
        self.assertEqual(trainer.train().global_step, 2)

    def test_state_of_another_partial_state_is_reset_with_one_line(self):
        # accelerate's debug mode and a fork's flag are part of the `PartialState`: arguments built without them set up
        # another one
        with patch.dict(os.environ, {"ACCELERATE_DEBUG_MODE": "true", "FORK_LAUNCHED": "1"}):
            accelerator = Accelerator(cpu=True)
        with capture_logs() as cl:
            self.make_args()
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertEqual(
            state_lines(cl),
            [
                "Resetting an earlier `Accelerator`'s state: its `debug` is `True`, these arguments' `False`; its "
                "`fork_launched` is `True`, these arguments' `False`."
            ],
        )

    @require_torch_accelerator
    def test_accelerator_state_then_cpu_arguments(self):
        device = Accelerator().device
        with capture_logs() as cl:
            trainer = self.make_trainer()
        self.assertIn(f"its `device` is `{device}`, these arguments' `cpu`", cl.out)
        self.assertEqual(len(state_lines(cl)), 1)
        trainer.train()
        self.assertEqual(trainer.accelerator.device.type, "cpu")

    @parameterized.expand(
        [
            ("failed_accelerator", "auto"),
            ("failed_accelerator", "preserve"),
            ("bare_accelerator_state", "auto"),
            ("bare_accelerator_state", "preserve"),
            ("bare_accelerator_state_with_a_plugin", "auto"),
        ]
    )
    def test_state_left_incomplete_is_set_up_again(self, maker, existing_state):
        # fp8 without its backend, or an `AcceleratorState()` of its own, raises after storing part of the state
        makers = {
            "failed_accelerator": lambda: Accelerator(cpu=True, mixed_precision="fp8"),
            "bare_accelerator_state": AcceleratorState,
            "bare_accelerator_state_with_a_plugin": lambda: AcceleratorState(dynamo_plugin=TorchDynamoPlugin()),
        }
        with self.assertRaises(ValueError):
            makers[maker]()
        with capture_logs() as cl:
            self.make_args(accelerator_config={"existing_state": existing_state})
        self.assertEqual(Accelerator(cpu=True).mixed_precision, "no")  # the retry
        self.assertEqual(state_lines(cl), [])

    @parameterized.expand(
        [
            (
                "mixed_precision",
                {"mixed_precision": "bf16"},
                {},
                "its `mixed_precision` is `bf16`, this `Trainer`'s `no`",
            ),
            (
                "arguments_mixed_precision",
                {},
                {"bf16": True},
                "its `mixed_precision` is `no`, this `Trainer`'s `bf16`",
            ),
            (
                "dynamo",
                {"dynamo_backend": "eager"},
                {},
                "its `dynamo_plugin.backend` is `EAGER`, this `Trainer`'s `NO`.",
            ),
            (
                "both",
                {"mixed_precision": "bf16", "dynamo_backend": "eager"},
                {},
                "its `mixed_precision` is `bf16`, this `Trainer`'s `no`; its `dynamo_plugin.backend` is `EAGER`, this "
                "`Trainer`'s `NO`.",
            ),
        ]
    )
    def test_trainer_resets_a_kept_state_that_differs_from_its_accelerator(self, _, state_kwargs, args_kwargs, named):
        Accelerator(cpu=True, **state_kwargs)
        with capture_logs() as cl:
            trainer = self.make_trainer(**args_kwargs)
        (line,) = state_lines(cl)
        self.assertTrue(line.startswith(f"Resetting an earlier `Accelerator`'s state: {named}"), line)
        self.assertTrue(line.endswith("`."), line)
        self.assertLess(len(line), 200)  # the values that differ, not two whole plugins
        trainer.train()
        self.assertEqual(trainer.accelerator.state.mixed_precision, "bf16" if args_kwargs else "no")
        self.assertEqual(trainer.accelerator.state.dynamo_plugin.backend.value, "NO")

    def test_trainer_sets_the_devices_up_again_after_a_reset(self):
        # the reset state goes with its `PartialState`: the `Trainer`'s `Accelerator` gets the devices of the arguments
        # (`use_cpu`), not the device it would find itself, here an accelerator's stand-in
        Accelerator(cpu=True)
        args = self.make_args(bf16=True, max_steps=2)
        with patch.object(
            PartialState, "default_device", new_callable=PropertyMock, return_value=torch.device("meta")
        ):
            trainer = Trainer(
                RegressionPreTrainedModel(RegressionModelConfig()), args, train_dataset=RegressionDataset()
            )
        self.assertEqual(trainer.accelerator.device.type, "cpu")
        self.assertEqual(trainer.accelerator.mixed_precision, "bf16")

    @parameterized.expand([("held", True), ("passed", False)])
    def test_a_kept_state_with_a_plugin_is_reset_with_an_info_line(self, _, held):
        # a plugin cannot be shown equal to another: the state is not reused, which is not a difference to warn of
        if not held and "parallelism_config" not in TrainingArguments.__dataclass_fields__:
            self.skipTest("these `TrainingArguments` take no `parallelism_config`")
        plugins = "`torch_tp_plugin`, `parallelism_config`" if held else "`parallelism_config`"
        for level, lines in [
            (logging.WARNING, []),
            (logging.INFO, [f"Resetting an earlier `Accelerator`'s state: with {plugins}, it cannot be reused."]),
        ]:
            AcceleratorState._reset_state(reset_partial_state=True)
            Accelerator(cpu=True, parallelism_config=ParallelismConfig() if held else None)
            if held:  # and a tensor-parallel plugin beside it, as a stand-in
                AcceleratorState._shared_state["torch_tp_plugin"] = object()
            kwargs = {} if held else {"parallelism_config": ParallelismConfig()}
            with LoggingLevel(level), capture_logs() as cl:
                trainer = self.make_trainer(**kwargs)
            self.assertEqual(state_lines(cl), lines)
        if not held:  # the `Trainer`'s own plugin, which the kept state would have ignored
            self.assertIs(AcceleratorState().parallelism_config, kwargs["parallelism_config"])
        trainer.train()
        self.assertEqual(trainer.state.global_step, 2)

    def test_trainer_keeps_a_state_equal_to_its_accelerator(self):
        accelerator = Accelerator(cpu=True, mixed_precision="bf16")
        plugin = accelerator.state.dynamo_plugin
        with capture_logs() as cl:
            trainer = self.make_trainer(bf16=True)
            trainer.train()
        self.assertEqual(state_lines(cl), [])
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)  # the user's state, not an equal new one
        self.assertEqual(trainer.state.global_step, 2)
        accelerator.prepare(RegressionPreTrainedModel(RegressionModelConfig()))
        self.assertEqual(accelerator.mixed_precision, "bf16")
        self.make_args(bf16=True)  # the next cell's arguments: still the user's state, not one the `Trainer` made
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)

    def test_trainer_keeps_a_state_that_compiles_as_its_arguments_ask(self):
        accelerator = Accelerator(cpu=True, dynamo_backend="eager")
        plugin = accelerator.state.dynamo_plugin
        with capture_logs() as cl:
            self.make_trainer(torch_compile_backend="eager")
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(state_lines(cl), [])

    def test_a_kept_state_stays_its_accelerators(self):
        # What changes on purpose: after the arguments keep an `Accelerator`'s state, accelerate refuses another
        # precision for it, ignores another dynamo backend, and `notebook_launcher` refuses to launch, as they do
        # without transformers in between
        Accelerator(cpu=True)
        self.make_args()
        with self.assertRaisesRegex(ValueError, "already been initialized"):
            Accelerator(cpu=True, mixed_precision="bf16")
        self.assertEqual(Accelerator(cpu=True, dynamo_backend="eager").state.dynamo_plugin.backend.value, "NO")
        with self.assertRaisesRegex(ValueError, "the `Accelerator` should only be initialized"):
            notebook_launcher(print, num_processes=2)

    def test_a_later_accelerator_joins_the_kept_state_which_the_trainer_checks(self):
        # the same `Accelerator` again after the arguments shares the kept state: the `Trainer` compares it with its
        # own arguments, resets it and trains as they say (main: accelerate refused the `Trainer`'s precision)
        Accelerator(cpu=True, mixed_precision="bf16")
        args = self.make_args(max_steps=2)
        Accelerator(cpu=True, mixed_precision="bf16")
        with capture_logs() as cl:
            trainer = Trainer(
                RegressionPreTrainedModel(RegressionModelConfig()), args, train_dataset=RegressionDataset()
            )
        self.assertEqual(
            state_lines(cl),
            ["Resetting an earlier `Accelerator`'s state: its `mixed_precision` is `bf16`, this `Trainer`'s `no`."],
        )
        self.assertEqual(trainer.train().global_step, 2)

    @parameterized.expand([("trainer",), ("subclass_with_its_own_accelerator",)])
    def test_state_of_a_previous_trainer_is_replaced_quietly(self, trainer_class):
        # A notebook: a `Trainer` trains, the cell runs again with bf16, then the user builds an `Accelerator`; a
        # subclass that builds its own `Accelerator` (without calling the base method) counts as a `Trainer`
        trainer_class = Trainer if trainer_class == "trainer" else OwnAcceleratorTrainer
        with capture_logs() as cl:
            for bf16 in (False, True):
                args = self.make_args(bf16=bf16, max_steps=2)
                model = RegressionPreTrainedModel(RegressionModelConfig())
                trainer = trainer_class(model, args, train_dataset=RegressionDataset())
                trainer.train()
                self.assertEqual(trainer.accelerator.mixed_precision, "bf16" if bf16 else "no")
            self.make_args()
            accelerator = Accelerator(cpu=True, mixed_precision="bf16", dynamo_backend="eager")
        self.assertEqual(accelerator.mixed_precision, "bf16")
        self.assertEqual(accelerator.state.dynamo_plugin.backend.value, "EAGER")
        self.assertEqual(state_lines(cl), [])

    @parameterized.expand([("mixed_precision", {"mixed_precision": "bf16"}), ("dynamo", {"dynamo_backend": "eager"})])
    def test_accelerator_created_after_the_arguments_is_left_to_accelerate(self, _, accelerator_kwargs):
        # the documented order (arguments, then `Accelerator`): a state the arguments did not see is not reset
        args = self.make_args(max_steps=2)
        accelerator = Accelerator(cpu=True, **accelerator_kwargs)
        with capture_logs() as cl:
            try:
                self.trainer_on(args)
            except ValueError as error:  # 5.x passes its mixed precision, which accelerate refuses to change
                self.assertIn("already been initialized", str(error))
        self.assertEqual(accelerator.mixed_precision, accelerator_kwargs.get("mixed_precision", "no"))
        self.assertEqual(
            accelerator.state.dynamo_plugin.backend.value, "EAGER" if "dynamo_backend" in accelerator_kwargs else "NO"
        )
        self.assertEqual(state_lines(cl), [])

    def test_a_subclass_with_its_own_accelerator_does_not_reuse_a_kept_state(self):
        # its `Accelerator`'s arguments cannot be compared: it gets a state of its own, as on main
        Accelerator(cpu=True, dynamo_backend="eager")
        args = self.make_args(max_steps=2)
        with LoggingLevel(logging.INFO), capture_logs() as cl:
            trainer = OwnAcceleratorTrainer(RegressionPreTrainedModel(RegressionModelConfig()), args)
        own = "`OwnAcceleratorTrainer.create_accelerator_and_postprocess`"
        self.assertEqual(
            state_lines(cl),
            [
                f"Resetting an earlier `Accelerator`'s state: with {own}, it cannot be reused (to reuse it as it is,"
                " pass `accelerator_config={'use_configured_state': True}`)."
            ],
        )
        self.assertEqual(trainer.accelerator.state.dynamo_plugin.backend.value, "NO")

    def test_a_state_made_after_the_arguments_discarded_theirs_is_left_to_accelerate(self):
        # the arguments kept a state, which later arguments reset; the user's next `Accelerator` made another
        plugin = Accelerator(cpu=True).state.dynamo_plugin
        args = self.make_args(max_steps=2)
        self.make_args(accelerator_config={"existing_state": "reset"})
        accelerator = Accelerator(cpu=True, dynamo_backend="eager")
        with capture_logs() as cl:
            self.trainer_on(args)
        self.assertIsNot(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(accelerator.state.dynamo_plugin.backend.value, "EAGER")  # accelerate keeps it, as on main
        self.assertEqual(state_lines(cl), [])

    def test_notebook_reruns_with_other_settings(self):
        # a changed setting gets a fresh state, an unchanged one the state of the previous run
        for bf16, learning_rate in [(False, 1e-3), (True, 1e-3), (True, 1e-2)]:
            with capture_logs() as cl:
                trainer = self.make_trainer(bf16=bf16, learning_rate=learning_rate)
                trainer.train()
            self.assertEqual(trainer.accelerator.state.mixed_precision, "bf16" if bf16 else "no")
            self.assertEqual(state_lines(cl), [])  # each state was a `Trainer`'s

    def test_reset(self):
        accelerator = Accelerator(cpu=True)
        with capture_logs() as cl:
            self.make_args(accelerator_config={"existing_state": "reset"})
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertEqual(state_lines(cl), [])

    def test_preserve_keeps_a_state_as_it_is(self):
        # even one whose `PartialState` differs from what the arguments set up (here accelerate's debug mode), and
        # whose `TorchDynamoPlugin` differs from the `Trainer`'s: the `Trainer` checks nothing
        with patch.dict(os.environ, {"ACCELERATE_DEBUG_MODE": "true"}):
            accelerator = Accelerator(cpu=True, dynamo_backend="eager")
        plugin = accelerator.state.dynamo_plugin
        with capture_logs() as cl:
            trainer = self.make_trainer(accelerator_config={"existing_state": "preserve"})
        self.assertTrue(accelerator.state.debug)
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(trainer.accelerator.mixed_precision, "no")
        self.assertEqual(state_lines(cl), [])

    def test_preserve_without_a_state_sets_one_up(self):
        args = self.make_args(accelerator_config={"existing_state": "preserve"})
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().num_processes, 1)

    def test_use_configured_state_takes_a_state_as_it_is(self):
        with self.assertRaisesRegex(ValueError, "requires a pre-configured"):
            self.make_args(accelerator_config={"use_configured_state": True})
        with patch.dict(os.environ, {"ACCELERATE_DEBUG_MODE": "true"}):
            accelerator = Accelerator(cpu=True)
        plugin = accelerator.state.dynamo_plugin
        with capture_logs() as cl:
            self.make_trainer(accelerator_config={"use_configured_state": True})
        self.assertEqual(state_lines(cl), [])
        self.assertTrue(accelerator.state.debug)
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)

    @parameterized.expand([("reset",), ("preserve",), ("use_configured_state",)])
    def test_a_trainer_checks_a_state_other_arguments_kept_whatever_its_own_policy(self, policy):
        # The `Trainer`'s arguments did not keep the state (made before it, or taking it as it is), later `"auto"`
        # arguments did: the `Trainer` checks it, resets it and trains as its arguments say (main: the later
        # arguments reset it, and the `Trainer` made a fresh one)
        if not hasattr(Trainer, "_build_accelerator_args"):
            self.skipTest("this `Trainer` passes no precision of its own: it takes the later arguments' one")
        ucs = policy == "use_configured_state"
        config = {"use_configured_state": True} if ucs else {"existing_state": policy}
        args = None if ucs else self.make_args(max_steps=2, accelerator_config=config)
        Accelerator(cpu=True, mixed_precision="bf16")
        args = self.make_args(max_steps=2, accelerator_config=config) if ucs else args
        self.make_args(bf16=True)
        with capture_logs() as cl:
            trainer = Trainer(
                RegressionPreTrainedModel(RegressionModelConfig()), args, train_dataset=RegressionDataset()
            )
        self.assertEqual(
            state_lines(cl),
            ["Resetting an earlier `Accelerator`'s state: its `mixed_precision` is `bf16`, this `Trainer`'s `no`."],
        )
        self.assertEqual(trainer.accelerator.mixed_precision, "no")
        self.assertEqual(trainer.train().global_step, 2)

    @parameterized.expand([("dict",), ("json_file",), ("command_line",)])
    def test_existing_state_is_validated(self, source):
        for config, message in [
            ({"existing_state": "keep"}, r"^`existing_state` must be 'auto', 'preserve' or 'reset', not 'keep'\.$"),
            (
                {"existing_state": "reset", "use_configured_state": True},
                r"^`use_configured_state=True` keeps the existing state: it contradicts `existing_state='reset'`\.$",
            ),
        ]:
            if source == "json_file":
                path = os.path.join(self.get_auto_remove_tmp_dir(), "accelerator_config.json")
                with open(path, "w", encoding="utf-8") as f:
                    json.dump(config, f)
                config = path
            with self.assertRaisesRegex(ValueError, message):
                if source == "command_line":
                    cli = ["--output_dir", self.get_auto_remove_tmp_dir(), "--accelerator_config", json.dumps(config)]
                    HfArgumentParser(TrainingArguments).parse_args_into_dataclasses(cli + ["--use_cpu"])
                else:
                    self.make_args(accelerator_config=config)

    @parameterized.expand([("no_state", "auto"), ("after_a_failed_try", "auto"), ("after_a_failed_try", "preserve")])
    def test_fresh_init(self, before, existing_state):
        if before == "after_a_failed_try":
            # a stray `LOCAL_RANK` makes the initialization raise after storing part of the state
            with patch.dict(os.environ, {"LOCAL_RANK": "0"}), self.assertRaises(ValueError):
                TrainingArguments(self.get_auto_remove_tmp_dir(), report_to="none")
        with capture_logs() as cl:
            config = {} if existing_state == "auto" else {"accelerator_config": {"existing_state": existing_state}}
            args = self.make_args(**config)
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().num_processes, 1)
        self.assertEqual(state_lines(cl), [])

    def test_trainer_compares_what_a_subclass_passes(self):
        self.skip_unless_the_trainer_builds_its_accelerator_args()
        Accelerator(cpu=True)
        args = self.make_args(max_steps=2)
        model = RegressionPreTrainedModel(RegressionModelConfig())
        with capture_logs() as cl:
            trainer = BF16Trainer(model, args, train_dataset=RegressionDataset())
        self.assertIn("its `mixed_precision` is `no`, this `Trainer`'s `bf16`", cl.out)
        self.assertEqual(trainer.accelerator.mixed_precision, "bf16")

    @parameterized.expand([("parallelism_config",), ("any_error",)])
    def test_state_of_a_trainer_that_failed_is_replaced_quietly(self, failure):
        # A `Trainer` whose `Accelerator` raises after storing its state (a `ParallelismConfig` one process cannot
        # honour, or any error there), then corrected arguments in the next cell: the state was the `Trainer`'s
        if failure == "parallelism_config":
            if "parallelism_config" not in TrainingArguments.__dataclass_fields__:
                self.skipTest("these `TrainingArguments` take no `parallelism_config`")
            args, failing = self.make_args(parallelism_config=ParallelismConfig(tp_size=2)), patch.dict({})
        else:

            def failing_accelerator(**kwargs):
                Accelerator(**kwargs)
                raise RuntimeError("failed after storing its state")

            args, failing = self.make_args(), patch("transformers.trainer.Accelerator", failing_accelerator)
        with failing, self.assertRaises((RuntimeError, ValueError)):
            self.trainer_on(args)
        self.assertIn("_mixed_precision", AcceleratorState._shared_state)  # stored before the error
        with LoggingLevel(logging.INFO), capture_logs() as cl:
            self.make_args()
            self.assertEqual(Accelerator(cpu=True, mixed_precision="bf16").mixed_precision, "bf16")
        self.assertEqual(state_lines(cl), [])

    def test_a_kept_state_a_trainer_took_is_left_to_accelerate(self):
        # Two `Trainer`s on one arguments object: the first took the kept state; the second, asking for another
        # precision, is refused by accelerate as on main, and the first `Trainer` keeps its state
        self.skip_unless_the_trainer_builds_its_accelerator_args()
        Accelerator(cpu=True)
        args = self.make_args(max_steps=2)
        first = self.trainer_on(args)
        with capture_logs() as cl, self.assertRaisesRegex(ValueError, "already been initialized"):
            self.trainer_on(args, BF16Trainer)
        self.assertEqual(state_lines(cl), [])
        self.assertEqual(first.accelerator.mixed_precision, "no")
        self.assertEqual(first.train().global_step, 2)

    @parameterized.expand([("other_arguments",), ("a_copy",), ("a_subclass_on_other_arguments",)])
    def test_a_kept_state_a_trainer_took_is_left_to_accelerate_for_every_arguments(self, second):
        # Arguments built before the first `Trainer` took the kept state (or a copy of its arguments) claim it no
        # longer: a second `Trainer` on them is left to accelerate, which refuses another precision as on main, and
        # a subclass with its own `Accelerator` does not reset the live `Trainer`'s state
        if second != "a_subclass_on_other_arguments" and not hasattr(Trainer, "_build_accelerator_args"):
            self.skipTest("this `Trainer` builds its `Accelerator`'s arguments inline")
        Accelerator(cpu=True)
        args = self.make_args(max_steps=2)
        bf16 = second == "other_arguments"
        other = copy.deepcopy(args) if second == "a_copy" else self.make_args(max_steps=2, bf16=bf16)
        first = self.trainer_on(args)
        plugin = AcceleratorState().dynamo_plugin
        with LoggingLevel(logging.INFO), capture_logs() as cl:
            if second == "a_subclass_on_other_arguments":
                OwnAcceleratorTrainer(RegressionPreTrainedModel(RegressionModelConfig()), other)
            else:
                with self.assertRaisesRegex(ValueError, "already been initialized"):
                    BF16Trainer(RegressionPreTrainedModel(RegressionModelConfig()), other)
        self.assertEqual(state_lines(cl), [])
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(first.accelerator.mixed_precision, "no")

    @parameterized.expand([("bf16", {"bf16": True}), ("compiling", {"torch_compile_backend": "eager"})])
    def test_a_state_kept_by_later_arguments_is_checked_for_earlier_ones(self, _, later_kwargs):
        # Arguments, the user's `Accelerator`, other arguments that keep its state, then a `Trainer` on each: the
        # first `Trainer` checks the kept state against its own arguments (main: later arguments reset it, and the
        # first `Trainer` made a fresh one) and takes it; the second, left to accelerate, leaves the live one alone
        if not hasattr(Trainer, "_build_accelerator_args"):
            self.skipTest("this `Trainer` passes no precision or dynamo plugin of its own")
        args = self.make_args(max_steps=2)
        Accelerator(cpu=True, mixed_precision="bf16")
        later = self.make_args(max_steps=2, **later_kwargs)
        with capture_logs() as cl:
            first = Trainer(
                RegressionPreTrainedModel(RegressionModelConfig()), args, train_dataset=RegressionDataset()
            )
        self.assertEqual(
            state_lines(cl),
            ["Resetting an earlier `Accelerator`'s state: its `mixed_precision` is `bf16`, this `Trainer`'s `no`."],
        )
        plugin = AcceleratorState().dynamo_plugin
        with capture_logs() as cl:
            try:
                self.trainer_on(later)
            except ValueError as error:  # another precision, which accelerate refuses as on main
                self.assertIn("already been initialized", str(error))
        self.assertEqual(state_lines(cl), [])
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(first.accelerator.mixed_precision, "no")
        self.assertEqual(first.train().global_step, 2)

    def test_trainer_resets_a_kept_state_that_compiles_in_another_mode(self):
        Accelerator(cpu=True, dynamo_plugin=TorchDynamoPlugin(backend="eager", mode="reduce-overhead"))
        with capture_logs() as cl:
            trainer = self.make_trainer(torch_compile_backend="eager")
        self.assertEqual(
            state_lines(cl),
            [
                "Resetting an earlier `Accelerator`'s state: its `dynamo_plugin.mode` is `reduce-overhead`, this "
                "`Trainer`'s `default`."
            ],
        )
        self.assertEqual(trainer.accelerator.state.dynamo_plugin.mode, "default")

    @parameterized.expand([("after_arguments_reset_it",), ("after_a_trainer_reset_it",)])
    def test_a_plugin_used_again_by_a_new_accelerator_is_not_a_kept_state(self, how):
        # The kept state is reset (by arguments, or by a `Trainer` whose settings differ); the user's next
        # `Accelerator` passes the same `TorchDynamoPlugin` object: a new state, made after the arguments, which the
        # `Trainer` leaves to accelerate as on main
        plugin = TorchDynamoPlugin(backend="eager")
        Accelerator(cpu=True, dynamo_plugin=plugin)
        first = self.make_args(max_steps=2)
        if how == "after_arguments_reset_it":
            self.make_args(accelerator_config={"existing_state": "reset"})
        else:
            self.trainer_on(first)
        args = self.make_args(max_steps=2)
        Accelerator(cpu=True, dynamo_plugin=plugin)
        with capture_logs() as cl:
            self.trainer_on(args)
        self.assertEqual(state_lines(cl), [])
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)

    def test_reset_lines_follow_the_log_level(self):
        # the arguments' line and the `Trainer`'s, each from a state reset all the same
        with patch.dict(os.environ, {"ACCELERATE_DEBUG_MODE": "true"}):
            accelerator = Accelerator(cpu=True)
        with capture_logs() as cl:
            self.make_args(log_level="error")
        self.assertEqual(state_lines(cl), [])
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        Accelerator(cpu=True, mixed_precision="bf16")
        with LoggingLevel(logging.WARNING), capture_logs() as cl:  # the level the `Trainer` sets is restored after
            trainer = self.make_trainer(log_level="error")
        self.assertEqual(state_lines(cl), [])
        self.assertEqual(trainer.accelerator.mixed_precision, "no")

    @parameterized.expand(
        [
            ("without_an_index", torch.device("cpu", 0), None, []),
            ("another_index", torch.device("cpu", 1), torch.device("cpu", 0), ["its `device` is `cpu:1`"]),
            ("another_type", torch.device("meta"), None, ["its `device` is `meta`"]),
        ]
    )
    def test_a_device_named_without_its_index_is_the_same_device(self, _, device, built, named):
        accelerator = Accelerator(cpu=True)
        PartialState._shared_state["device"] = device  # as another launch names it (a stand-in)
        with capture_logs() as cl:
            if built is None:
                self.make_args()
            else:  # arguments that set up an indexed device themselves (a stand-in)
                with patch.object(PartialState, "default_device", new_callable=PropertyMock, return_value=built):
                    TrainingArguments(self.get_auto_remove_tmp_dir(), report_to="none")
        self.assertEqual([line.split(", these")[0].split(": ")[1] for line in state_lines(cl)], named)
        self.assertEqual(hasattr(accelerator.state, "distributed_type"), not named)

    def test_a_kept_state_is_checked_by_the_next_trainer_after_one_failed_before_its_accelerator(self):
        # the first `Trainer` raises before its `Accelerator` (a setting it refuses); the kept state is still the
        # arguments' to check, so the corrected `Trainer` resets it and trains as its arguments say, as on main
        Accelerator(cpu=True, mixed_precision="bf16")
        config = {"gradient_accumulation_kwargs": {"num_steps": 2}}
        args = self.make_args(max_steps=2, gradient_accumulation_steps=2, accelerator_config=config)
        with self.assertRaisesRegex(ValueError, "`num_steps` is set"):
            self.trainer_on(args)
        args.gradient_accumulation_steps = 1
        trainer = self.trainer_on(args)
        self.assertEqual(trainer.accelerator.mixed_precision, "no")
        self.assertEqual(trainer.train().global_step, 2)

    def test_an_accelerator_that_failed_after_storing_its_state_is_kept(self):
        # Not told apart: an error raised after accelerate stored a complete state leaves it behind, as accelerate
        # does without transformers; the arguments keep it and a retry gets its precision
        with self.assertRaises(ValueError):
            Accelerator(
                cpu=True,
                mixed_precision="bf16",
                gradient_accumulation_steps=2,
                gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=2),
            )
        self.make_args()
        self.assertEqual(Accelerator(cpu=True).mixed_precision, "bf16")

    def test_an_accelerator_a_trainer_joined_is_replaced_by_new_arguments(self):
        # The documented order (arguments, `Accelerator`, `Trainer`) and new arguments after it: the `Trainer` built
        # its `Accelerator` on the user's state, which counts as the `Trainer`'s and is reset quietly, as on main
        args = self.make_args(max_steps=2)
        accelerator = Accelerator(cpu=True)
        self.trainer_on(args)
        with capture_logs() as cl:
            self.make_args()
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        self.assertEqual(state_lines(cl), [])

    def test_trainer_set_up_again_keeps_what_was_changed_since(self):
        # `args._n_gpu`, set after the arguments (one GPU of several, without `DataParallel`), survives the reset
        Accelerator(cpu=True)
        args = self.make_args(bf16=True, max_steps=2)
        args._n_gpu = 1
        self.trainer_on(args)
        self.assertEqual(args.n_gpu, 1)

    def test_trainer_compares_a_cpu_a_subclass_asks_for(self):
        self.skip_unless_the_trainer_builds_its_accelerator_args()

        class CPUTrainer(Trainer):
            def _build_accelerator_args(self, **kwargs):
                return {**super()._build_accelerator_args(**kwargs), "cpu": True}

        # a state on an accelerator (a stand-in device), then a `Trainer` that asks for the CPU: reset, not refused by
        # accelerate; its `Accelerator` then takes the devices the arguments set up, as on main
        with patch.object(
            PartialState, "default_device", new_callable=PropertyMock, return_value=torch.device("meta")
        ):
            Accelerator()
            args = TrainingArguments(self.get_auto_remove_tmp_dir(), report_to="none", max_steps=2)
            with capture_logs() as cl:
                trainer = CPUTrainer(RegressionPreTrainedModel(RegressionModelConfig()), args)
        self.assertEqual(trainer.accelerator.device.type, "meta")  # the devices the arguments set up, as on main
        self.assertEqual(
            state_lines(cl),
            ["Resetting an earlier `Accelerator`'s state: its `cpu` is `False`, this `Trainer`'s `True`."],
        )
        # a state on the CPU is what such a `Trainer` asks for: used as it is
        AcceleratorState._reset_state(reset_partial_state=True)
        plugin = Accelerator(cpu=True).state.dynamo_plugin
        with capture_logs() as cl:
            CPUTrainer(RegressionPreTrainedModel(RegressionModelConfig()), self.make_args(max_steps=2))
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(state_lines(cl), [])

    def test_gradient_state_is_shared_by_the_process(self):
        # The `Trainer` accumulates gradients itself and sets accelerate's process-wide `GradientState` to 1 step:
        # an `Accelerator(gradient_accumulation_steps=4)` of the user's reads 1 afterwards, with or without this fix
        accelerator = Accelerator(cpu=True, gradient_accumulation_steps=4)
        self.make_trainer()
        self.assertEqual(accelerator.gradient_state.num_steps, 1)

    @parameterized.expand([("equal",), ("compiling_trials",)])
    @require_optuna
    def test_hyperparameter_search_keeps_an_equal_state(self, trials):
        # Each trial creates the `Trainer`'s `Accelerator` again on the state the `Trainer` took: accelerate keeps it
        # also for trials that compile, as it does without an `Accelerator` of the user's
        def hp_space(trial):
            backend = {"torch_compile_backend": "eager"} if trials == "compiling_trials" else {}
            return {"learning_rate": trial.suggest_float("learning_rate", 1e-3, 1e-1, log=True), **backend}

        plugin = Accelerator(cpu=True).state.dynamo_plugin
        trainer = get_regression_trainer(
            output_dir=self.get_auto_remove_tmp_dir(),
            report_to="none",
            use_cpu=True,
            max_steps=2,
            eval_strategy="no",
            model_init=lambda: RegressionPreTrainedModel(RegressionModelConfig()),
        )
        with capture_logs() as cl:
            best = trainer.hyperparameter_search(backend="optuna", direction="minimize", hp_space=hp_space, n_trials=2)
        self.assertTrue(torch.isfinite(torch.tensor(best.objective)))
        self.assertIs(AcceleratorState().dynamo_plugin, plugin)
        self.assertEqual(state_lines(cl), [])
