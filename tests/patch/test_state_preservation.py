"""A state made before `TrainingArguments`: kept, reset or refused, per policy, state maker and arguments."""

from parameterized import parameterized

from harness.scenarios import ARGUMENT_VARIANTS, DEFAULT, STATE_MAKERS, all_scenarios, promised, record
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
        canary = object()  # lives in the shared borg dict: gone if and only if the dict was cleared
        state.__dict__["_canary"] = canary

        with capture_training_args_logs() as logged:
            try:
                make_training_args(
                    self.output_dir, None if policy == DEFAULT else policy, **ARGUMENT_VARIANTS[arguments]()
                )
                outcome = "kept" if state.__dict__.get("_canary") is canary else "reset"
            except ValueError as error:
                outcome, message = "error", str(error)
        # what was seen, before it is judged: the report counts scenarios that kept the promise
        record("scenario", policy=policy, state=maker, arguments=arguments, device=device.type, outcome=outcome)

        self.assertEqual(outcome, promised(policy, arguments, device.type, PATCHED))
        if outcome == "kept":
            after = (state.distributed_type, state.device, state.num_processes, state.process_index)
            self.assertEqual(after, before)
            self.assertNotIn("state", logged.out.lower())  # quiet when all is well
        elif outcome == "error":
            self.assertIn("accelerator_state_policy='preserve'", message)
            self.assertIn(str(device), message)
        elif PATCHED and policy != "reset":  # a discarded `Accelerator`'s state is named; a `PartialState` is not
            self.assertEqual(RESET_WARNING in logged.out, maker != "PartialState()")
        else:  # `reset` asked for it (and the published release always resets), without a word
            self.assertNotIn("state", logged.out.lower())
        if outcome == "reset":
            self.assertNotIn("_canary", state.__dict__)
