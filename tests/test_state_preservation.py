"""A state made before `TrainingArguments`: kept, reset or refused, per switch value, state maker and arguments."""

import itertools

from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from parameterized import parameterized
from transformers.trainer_pt_utils import AcceleratorConfig

from tests.testing_utils import (
    PATCHED,
    POLICIES,
    AccelerateStateTestCase,
    capture_training_args_logs,
    make_training_args,
    record_scenario,
)

STATE_MAKERS = {
    "Accelerator()": lambda: Accelerator().state,
    "Accelerator(cpu=True)": lambda: Accelerator(cpu=True).state,
    "PartialState()": PartialState,
    # `AcceleratorState()` only builds inside an `Accelerator`; afterwards it is the handle libraries take.
    "AcceleratorState()": lambda: (Accelerator(mixed_precision="no"), AcceleratorState())[1],
}
ARGUMENTS = {
    "defaults": dict,
    "use_cpu": lambda: {"use_cpu": True},
    "config_dict": lambda: {"accelerator_config": {"split_batches": False}},
    "config_dataclass": lambda: {"accelerator_config": AcceleratorConfig(split_batches=False)},
    "use_configured_state": lambda: {"accelerator_config": {"use_configured_state": True}},
}


def expected_outcome(policy, arguments, state_device, patched=PATCHED):
    """What the switch promises (or what the unpatched release does) for one scenario."""
    if arguments == "use_configured_state":
        return "preserved"  # the upstream opt-in, unchanged by the patch
    if not patched or policy == "reset":
        return "reset"
    if arguments == "use_cpu" and state_device.type != "cpu":
        return "error" if policy == "preserve" else "reset"
    return "preserved"


def cases():
    for policy, maker, arguments in itertools.product((None, *POLICIES), STATE_MAKERS, ARGUMENTS):
        yield f"{policy or 'default'}_{maker}_{arguments}", policy, maker, arguments


class StatePreservationTest(AccelerateStateTestCase):
    @parameterized.expand(list(cases()))
    def test_existing_state(self, _, policy, maker, arguments):
        state = STATE_MAKERS[maker]()
        before = (state.distributed_type, state.device, state.num_processes, state.process_index)
        canary = object()  # lives in the shared borg dict: gone if and only if the dict was cleared
        state.__dict__["_canary"] = canary
        expected = expected_outcome(policy, arguments, state.device)

        with capture_training_args_logs() as warnings:
            try:
                make_training_args(self.output_dir, policy, **ARGUMENTS[arguments]())
                kept = state.__dict__.get("_canary") is canary
                outcome = "preserved" if kept else "reset"
            except ValueError as error:
                outcome, message = "error", str(error)

        self.assertEqual(outcome, expected)
        if outcome == "preserved":
            after = (state.distributed_type, state.device, state.num_processes, state.process_index)
            self.assertEqual(after, before)
        elif outcome == "error":
            self.assertIn("accelerator_state_policy='preserve'", message)
            self.assertIn(str(state.device), message)
        elif PATCHED:  # a discarded live state is never silent
            self.assertIn("Resetting the existing accelerator state", warnings.out)
        if outcome == "reset":
            self.assertNotIn("_canary", state.__dict__)
        # only once every assertion held: the matrix report shows verified outcomes
        record_scenario(
            policy=policy or "default", state=maker, arguments=arguments, outcome=outcome, device=before[1].type
        )
