"""The env is what its name promises: the pinned transformers version, patched or not."""

import os
import re
from pathlib import Path

import pytest
import transformers

from tests.testing_utils import PATCHED


def expected_version() -> str:
    src = os.environ.get("TRANSFORMERS_SRC")
    if src:
        init = (Path(src) / "src/transformers/__init__.py").read_text()
        return re.search(r'__version__ = "([^"]+)"', init).group(1)
    return os.environ["TF_VERSION"]


pytestmark = pytest.mark.skipif(
    "EXPECT_PATCHED" not in os.environ, reason="outside tox: no env promises a version (tox sets TF_VERSION)"
)


def test_transformers_version_is_the_pinned_one():
    assert transformers.__version__ == expected_version()


def test_patch_state_is_the_promised_one():
    assert PATCHED == (os.environ["EXPECT_PATCHED"] == "1")
