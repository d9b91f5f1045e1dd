"""A state made before `TrainingArguments`: kept or reset, per policy, state maker and arguments, on any host (the
expectation comes from the device the state has and the one the arguments set up here)."""

import torch
from parameterized import parameterized

from harness.scenarios import (
    ARGUMENT_VARIANTS,
    DEFAULT,
    STATE_MAKERS,
    all_scenarios,
    arguments_device,
    promised,
    record,
)
from tests.testing_utils import (
    PATCHED,
    RESET_WARNING,
    AccelerateStateTestCase,
    capture_training_args_logs,
    make_training_args,
)


class StatePreservationTest(AccelerateStateTestCase):
    @parameterized.expand(
        [(f"{policy}_{maker}_{arguments}", policy, maker, arguments) for policy, maker, arguments in all_scenarios()]
    )
    def test_existing_state(self, _, policy, maker, arguments):
        state = STATE_MAKERS[maker]()
        before = (state.distributed_type, state.device, state.num_processes, state.process_index)
        device = state.device
        # an equal but distinct device in the shared borg dict: still there if and only if the state was kept (a key
        # of its own would be a setting the patched release does not compare, so it would reset the state)
        canary = state.__dict__["device"] = torch.device(str(device))

        variant = ARGUMENT_VARIANTS[arguments]()
        with capture_training_args_logs() as logged:
            try:
                make_training_args(self.output_dir, None if policy == DEFAULT else policy, **variant)
                outcome = "kept" if state.__dict__.get("device") is canary else "reset"
            except ValueError as error:
                outcome, message = "error", str(error)
        # what was seen, before it is judged: the report counts scenarios that kept the promise
        record("scenario", policy=policy, state=maker, arguments=arguments, device=device.type, outcome=outcome)

        expected = promised(policy, arguments, device.type, PATCHED, arguments_device(variant), maker)
        self.assertEqual(outcome, expected)
        if outcome == "kept":
            after = (state.distributed_type, state.device, state.num_processes, state.process_index)
            self.assertEqual(after, before)
            self.assertNotIn("state", logged.out.lower())  # quiet when all is well
        elif outcome == "error":
            self.assertIn("contradicts `existing_state='reset'`", message)
        elif PATCHED and policy != "reset" and maker != "PartialState()":  # a discarded `Accelerator`'s state is named
            self.assertIn(RESET_WARNING, logged.out)
            self.assertEqual(len(logged.out.splitlines()), 1)
        else:  # asked for, a `PartialState` alone (set up again, equal), or the published release: without a word
            self.assertNotIn("state", logged.out.lower())
        if outcome == "reset":
            self.assertIsNot(state.__dict__.get("device"), canary)
