"""Stand-in for upstream's `tests/trainer/distributed/test_trainer_distributed.py`: the paths the PR's distributed
test imports from it, defined as upstream defines them (huggingface/transformers 9bb32261ec82)."""

import os

DISTRIBUTED_DIR = os.path.dirname(__file__)
CONFIGS_DIR = os.path.join(DISTRIBUTED_DIR, "accelerate_configs")
SCRIPTS_DIR = os.path.join(DISTRIBUTED_DIR, "scripts")
