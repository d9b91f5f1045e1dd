"""Dia fine-tuning on Accelerate: one program for TPU (torch_xla), GPU and CPU, configured by one YAML file."""
