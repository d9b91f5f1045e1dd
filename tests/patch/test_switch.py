"""The one switch, `accelerator_state_policy`: a field, a CLI flag, a YAML or JSON key; a bad value is refused."""

import json
import os

import yaml
from accelerate import Accelerator
from parameterized import parameterized
from transformers import HfArgumentParser, TrainingArguments

from tests.testing_utils import AccelerateStateTestCase, bug_on_unpatched


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

    @parameterized.expand([("yaml", yaml.safe_dump, "parse_yaml_file"), ("json", json.dumps, "parse_json_file")])
    @bug_on_unpatched
    def test_config_file(self, suffix, dump, parse):
        path = os.path.join(self.output_dir, f"args.{suffix}")
        with open(path, "w") as f:
            f.write(dump({"output_dir": self.output_dir, "accelerator_state_policy": "preserve"}))
        (args,) = getattr(HfArgumentParser(TrainingArguments), parse)(path)
        self.assertEqual(args.accelerator_state_policy, "preserve")

    @bug_on_unpatched
    def test_default_is_auto_and_keeps_a_matching_state(self):
        accelerator = Accelerator()
        args = TrainingArguments(output_dir=self.output_dir)
        self.assertEqual(args.accelerator_state_policy, "auto")
        self.assertEqual(args.to_dict()["accelerator_state_policy"], "auto")
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))

    @parameterized.expand([("Preserve",), ("keep",), ("",), (None,), (True,)])
    @bug_on_unpatched
    def test_bad_value_raises_value_error(self, value):
        accelerator = Accelerator()
        with self.assertRaisesRegex(ValueError, "`accelerator_state_policy` must be 'auto', 'preserve' or 'reset'"):
            TrainingArguments(output_dir=self.output_dir, accelerator_state_policy=value)
        self.assertTrue(hasattr(accelerator.state, "distributed_type"))  # refused before anything was touched

    @bug_on_unpatched
    def test_bad_value_is_refused_with_the_other_argument_checks(self):
        # before `__post_init__` reads `accelerator_config` or sets up the devices, as its value checks are
        missing = os.path.join(self.output_dir, "missing.json")
        with self.assertRaisesRegex(ValueError, "`accelerator_state_policy` must be"):
            TrainingArguments(output_dir=self.output_dir, accelerator_state_policy="keep", accelerator_config=missing)
