"""Stand-in for upstream's `tests/trainer/trainer_test_utils.py` (in its repository only): the names the PR's tests
import, with upstream's signatures, written here. y = a * x + b, learnt from noisy samples of y = 2x + 3."""

import dataclasses

import numpy as np
import torch
from torch import nn
from transformers import PreTrainedModel, Trainer, TrainingArguments

try:  # 5.x spells it PreTrainedConfig
    from transformers import PreTrainedConfig
except ImportError:
    from transformers import PretrainedConfig as PreTrainedConfig


class RegressionDataset:
    def __init__(self, a=2, b=3, length=64, seed=42, label_names=None):
        generator = np.random.default_rng(seed)
        self.label_names = label_names or ["labels"]
        self.x = generator.normal(size=length).astype(np.float32)
        self.ys = [(a * self.x + b + generator.normal(scale=0.1, size=length)).astype(np.float32)] * len(
            self.label_names
        )

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"input_x": self.x[i], **{name: y[i] for name, y in zip(self.label_names, self.ys, strict=True)}}


class RegressionModelConfig(PreTrainedConfig):
    def __init__(self, a=0, b=0, double_output=False, random_torch=True, **kwargs):
        super().__init__(**kwargs)
        self.a, self.b, self.double_output, self.random_torch, self.hidden_size = a, b, double_output, random_torch, 1


class RegressionPreTrainedModel(PreTrainedModel):
    config_class = RegressionModelConfig
    base_model_prefix = "regression"

    def __init__(self, config):
        super().__init__(config)
        self.a = nn.Parameter(torch.as_tensor(config.a).float())
        self.b = nn.Parameter(torch.as_tensor(config.b).float())
        self.double_output = config.double_output
        self.post_init()

    def forward(self, input_x, labels=None, **kwargs):
        y = input_x * self.a + self.b
        outputs = (y, y) if self.double_output else (y,)
        return outputs if labels is None else (nn.functional.mse_loss(y, labels), *outputs)


@dataclasses.dataclass
class RegressionTrainingArguments(TrainingArguments):
    a: float = 0.0
    b: float = 0.0


def get_regression_trainer(
    a=0, b=0, double_output=False, train_len=64, eval_len=64, pretrained=True, output_dir=None, **kwargs
):
    assert pretrained, "the stand-in has the pretrained model only"
    label_names = kwargs.get("label_names")
    model_init = kwargs.pop("model_init", None)
    model = None if model_init else RegressionPreTrainedModel(RegressionModelConfig(a, b, double_output))
    trainer = Trainer(
        model,
        RegressionTrainingArguments(output_dir, a=a, b=b, **kwargs),
        train_dataset=RegressionDataset(length=train_len, label_names=label_names),
        eval_dataset=RegressionDataset(length=eval_len, label_names=label_names),
        model_init=model_init,
    )
    trainer.model_accepts_loss_kwargs = False
    return trainer


class SampleIterableDataset(torch.utils.data.IterableDataset):
    def __init__(self, a=2, b=3, length=64, seed=42, label_names=None):
        self.dataset = RegressionDataset(a=a, b=b, length=length, seed=seed, label_names=label_names)

    def __iter__(self):
        yield from (self.dataset[i] for i in range(len(self.dataset)))
