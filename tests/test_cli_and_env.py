"""The policy from a CLI flag, a YAML file, the environment variable, and a bad value."""

import os

import yaml
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
        os.environ[POLICY_ENV] = "reset"
        self.assertEqual(TrainingArguments(output_dir=self.output_dir).accelerator_state_policy, "reset")
        explicit = TrainingArguments(output_dir=self.output_dir, accelerator_state_policy="auto")
        self.assertEqual(explicit.accelerator_state_policy, "auto")

    @bug_on_unpatched
    def test_default_is_auto(self):
        self.assertEqual(TrainingArguments(output_dir=self.output_dir).accelerator_state_policy, "auto")

    @bug_on_unpatched
    def test_bad_value_raises_value_error(self):
        for kwargs in ({"accelerator_state_policy": "Preserve"}, {}):
            os.environ[POLICY_ENV] = "sometimes"
            with self.assertRaisesRegex(ValueError, "must be one of 'auto', 'preserve' or 'reset'"):
                TrainingArguments(output_dir=self.output_dir, **kwargs)
