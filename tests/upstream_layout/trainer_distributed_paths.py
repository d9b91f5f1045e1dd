"""Stand-in for upstream's `tests/trainer/distributed/test_trainer_distributed.py`: the paths the PR's distributed
test imports from it."""

import os

CONFIGS_DIR = os.path.join(os.path.dirname(__file__), "accelerate_configs")
SCRIPTS_DIR = os.path.join(os.path.dirname(__file__), "scripts")
