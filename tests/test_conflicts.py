"""A state that contradicts the arguments: error, warning and reset, or warning, depending on the switch."""

from accelerate import Accelerator
from parameterized import parameterized

from tests.testing_utils import (
    PATCHED,
    AccelerateStateTestCase,
    bug_on_unpatched,
    capture_training_args_logs,
    make_training_args,
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
            self.assertEqual(sum("Resetting the existing accelerator state" in w for w in warnings), 1)
            for word in ["Resetting the existing accelerator state", *words]:
                self.assertIn(word, warnings.text)

    @parameterized.expand(CONFLICTS)
    def test_reset_warns(self, _, state_kwargs, args_kwargs, words):
        warnings = self.assert_state_discarded("reset", state_kwargs, args_kwargs)
        if PATCHED:
            self.assertIn("Resetting the existing accelerator state", warnings.text)
        else:
            # the bug: the release discards the state without a word about it
            self.assertFalse([w for w in warnings if "state" in w.lower()])
