"""A state that exists but cannot be used (an initialization that raised part way) is rebuilt, as published does."""

import os

from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import DistributedType
from parameterized import parameterized
from transformers import Trainer

from harness.scenarios import POLICIES
from tests.testing_utils import (
    AccelerateStateTestCase,
    TinyRegression,
    capture_training_args_logs,
    make_training_args,
    regression_dataset,
)


def failed_rendezvous(output_dir):
    # A stray LOCAL_RANK without RANK: torch.distributed raises after `PartialState` stored half its attributes.
    os.environ["LOCAL_RANK"] = "0"
    try:
        make_training_args(output_dir)
    finally:
        del os.environ["LOCAL_RANK"]


def unavailable_backend(output_dir):
    # No process group to use gloo with: `PartialState` raises after storing its device and backend.
    make_training_args(output_dir, use_cpu=True, ddp_backend="gloo")


def unsupported_mixed_precision(output_dir):
    # fp8 needs transformer_engine or MS-AMP: `AcceleratorState` raises after copying the `PartialState`.
    Accelerator(cpu=True, mixed_precision="fp8")


def bare_accelerator_state(output_dir):
    # accelerate refuses an `AcceleratorState` built outside an `Accelerator`, after copying the `PartialState`.
    AcceleratorState()


FAILED_INITIALIZATIONS = {
    "failed_rendezvous": failed_rendezvous,
    "unavailable_backend": unavailable_backend,
    "unsupported_mixed_precision": unsupported_mixed_precision,
    "bare_accelerator_state": bare_accelerator_state,
}


def cases():
    for name in FAILED_INITIALIZATIONS:
        for policy in (None, *POLICIES):
            yield f"{name}_{policy or 'default'}", name, policy


class UnusableStateTest(AccelerateStateTestCase):
    def leave_partial_state(self, name):
        with self.assertRaises((ValueError, ImportError, RuntimeError)):
            FAILED_INITIALIZATIONS[name](self.output_dir)
        self.assertTrue(PartialState._shared_state or AcceleratorState._shared_state)  # something was left behind

    @parameterized.expand(list(cases()))
    def test_retry_after_a_failed_initialization(self, _, name, policy):
        self.leave_partial_state(name)
        # every policy, `preserve` too: a state a failed try left incomplete is set up again
        with capture_training_args_logs() as warnings:
            args = make_training_args(self.output_dir, policy, use_cpu=True, bf16=True, max_steps=2)
        self.assertEqual(args.device.type, "cpu")
        self.assertEqual(PartialState().distributed_type, DistributedType.NO)
        self.assertEqual(PartialState().num_processes, 1)
        trainer = Trainer(model=TinyRegression(), args=args, train_dataset=regression_dataset())
        self.assertEqual(trainer.train().global_step, 2)
        self.assertEqual(trainer.accelerator.state.mixed_precision, "bf16")
        # no `Accelerator` was made: rebuilt without a word, as published does
        self.assertNotIn("state", warnings.out.lower())
