"""The policy from a CLI flag, a YAML file, the environment variable, and a bad value."""

import os

import yaml
from accelerate import Accelerator
from parameterized import parameterized
from transformers import HfArgumentParser, TrainingArguments

from tests.testing_utils import POLICY_ENV, AccelerateStateTestCase, bug_on_unpatched


class SwitchSourcesTest(AccelerateStateTestCase):
    @bug_on_unpatched
    def test_cli_flag(self):
        parser = HfArgumentParser(TrainingArguments)
        (args,) = parser.parse_args_into_dataclasses(
            ["--output_dir", self.output_dir, "--accelerator_state_policy", "reset"]
        )
        self.assertEqual(args.accelerator_state_policy, "reset")

    @bug_on_unpatched
    def test_cli_flag_rejects_unknown_value(self):
        parser = HfArgumentParser(TrainingArguments)
        with self.assertRaises(SystemExit):  # argparse prints the valid choices
            parser.parse_args_into_dataclasses(["--output_dir", self.output_dir, "--accelerator_state_policy", "keep"])

    @bug_on_unpatched
    def test_yaml_file(self):
        path = os.path.join(self.output_dir, "args.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"output_dir": self.output_dir, "accelerator_state_policy": "preserve"}, f)
        (args,) = HfArgumentParser(TrainingArguments).parse_yaml_file(path)
        self.assertEqual(args.accelerator_state_policy, "preserve")

    @bug_on_unpatched
    def test_environment_variable_and_precedence(self):
        accelerator = Accelerator()
        os.environ[POLICY_ENV] = "reset"
        args = TrainingArguments(output_dir=self.output_dir)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))
        # the field keeps what was passed: arguments derived later do not carry the environment's value
        self.assertIsNone(args.accelerator_state_policy)
        self.assertIsNone(args.to_dict()["accelerator_state_policy"])
        accelerator = Accelerator()
        TrainingArguments(output_dir=self.output_dir, accelerator_state_policy="auto")
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))

    @parameterized.expand([("upper", "RESET"), ("spaces", " reset "), ("mixed", "Reset\n")])
    def test_environment_variable_ignores_case_and_whitespace(self, _, value):
        accelerator = Accelerator()
        os.environ[POLICY_ENV] = value
        TrainingArguments(output_dir=self.output_dir)
        self.assertFalse(hasattr(accelerator.state, "distributed_type"))

    @bug_on_unpatched
    def test_empty_environment_variable_is_unset(self):
        accelerator = Accelerator()
        os.environ[POLICY_ENV] = ""
        TrainingArguments(output_dir=self.output_dir)
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))

    @bug_on_unpatched
    def test_default_is_unset_and_behaves_as_auto(self):
        accelerator = Accelerator()
        args = TrainingArguments(output_dir=self.output_dir)
        self.assertIsNone(args.accelerator_state_policy)
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))

    @bug_on_unpatched
    def test_bad_value_raises_value_error(self):
        with self.assertRaisesRegex(ValueError, "`accelerator_state_policy` must be one of 'auto', 'preserve' or"):
            TrainingArguments(output_dir=self.output_dir, accelerator_state_policy="Preserve")
        for value in ("sometimes", "none", "0"):
            os.environ[POLICY_ENV] = value
            with self.assertRaisesRegex(
                ValueError, f"`{POLICY_ENV}` .*must be one of 'auto', 'preserve' or 'reset', got '{value}'"
            ):
                TrainingArguments(output_dir=self.output_dir)
