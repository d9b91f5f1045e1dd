"""Dia fine-tuning on Accelerate: one program for TPU (torch_xla), GPU and CPU, configured by one YAML file."""

import sys

# Run as a program (`python -m tpu_demo.X`, also under `accelerate launch`; argv[0] is "-m" while the package is
# imported): an unsupported transformers stops here in one line, before a module imports what that release lacks.
if sys.argv[:1] == ["-m"]:
    from tpu_demo.runtime.compat import unsupported_transformers

    if reason := unsupported_transformers():
        from tpu_demo.cli import fail

        fail(reason)
