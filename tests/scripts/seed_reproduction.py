from accelerate import Accelerator
from transformers import TrainingArguments

# Create accelerator
accelerator = Accelerator()
print("Before:", hasattr(accelerator.state, "distributed_type"))
print("Value:", getattr(accelerator.state, "distributed_type", "NOT_FOUND"))

# This silently resets the accelerator state
training_args = TrainingArguments()

print("After:", hasattr(accelerator.state, "distributed_type"))
print("Value:", getattr(accelerator.state, "distributed_type", "NOT_FOUND"))
