"""The training loss: per-codebook weights and audio-only targets, equal to the model's own loss when uniform."""

import pytest
import torch

from tests.testing_utils import bug_on_unpatched, require_dia
from tpu_demo.errors import FineTuneError

pytestmark = require_dia


@pytest.fixture(scope="module")
def forward(tmp_path_factory):
    """A tiny Dia's loss, logits and labels on four synthetic samples."""
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.codes import CodesDataset, DiaCollator, write_synthetic
    from tpu_demo.model.dia import tiny_config
    from tpu_demo.training.loss import MODEL_INPUTS as inputs

    torch.manual_seed(0)
    model = DiaForConditionalGeneration(tiny_config()).eval()
    data = CodesDataset(write_synthetic(tmp_path_factory.mktemp("codes"), 4))
    batch = DiaCollator(model.config.delay_pattern, 48, 24, text_dropout=0.0, seed=0)([data[i] for i in range(4)])
    with torch.no_grad():
        out = model(**{k: batch[k] for k in inputs})
    return out.loss, out.logits, batch["labels"]


@pytest.mark.parametrize("weight", [1.0, 3.0])
def test_uniform_weights_give_the_models_own_loss(forward, weight):
    from tpu_demo.training.loss import CodebookLoss

    model_loss, logits, labels = forward
    loss = CodebookLoss(9, [weight] * 9)(logits, labels)
    assert loss.item() == pytest.approx(model_loss.item(), rel=1e-5)
    assert CodebookLoss(9, [weight] * 9).is_models_own


def test_weights_and_audio_only_targets(forward):
    from tpu_demo.model.tokens import AUDIO_EOS
    from tpu_demo.training.loss import CodebookLoss

    _, logits, labels = forward
    per_token = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels.clamp(min=0), reduction="none") * (
        labels != -100
    )
    rows = torch.arange(labels.shape[0]) % 9
    first, rest = per_token[rows == 0], per_token[rows != 0]
    count_first, count_rest = (labels[rows == 0] != -100).sum(), (labels[rows != 0] != -100).sum()
    expected = (4 * first.sum() + rest.sum()) / (4 * count_first + count_rest)
    assert CodebookLoss(9, [4] + [1] * 8)(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)

    audio = (labels != -100) & (labels < AUDIO_EOS)
    expected = (per_token * audio).sum() / audio.sum()
    assert CodebookLoss(9, audio_tokens_only=True)(logits, labels).item() == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("weights", [[1.0] * 8, [0.0] * 9, [-1.0] + [1.0] * 8])
def test_bad_weights_are_refused(weights):
    from tpu_demo.training.loss import CodebookLoss

    with pytest.raises(FineTuneError, match="codebook_weights: 9 non-negative weights"):
        CodebookLoss(9, weights)


def test_a_batch_of_one_sample_gives_the_models_loss(tmp_path):
    """A last eval batch (or a per-device batch) of one sample: its labels must suit the model's `view(-1)`."""
    from transformers import DiaForConditionalGeneration

    from tpu_demo.data.codes import CodesDataset, DiaCollator, write_synthetic
    from tpu_demo.model.dia import tiny_config
    from tpu_demo.training.loss import MODEL_INPUTS

    model = DiaForConditionalGeneration(tiny_config()).eval()
    data = CodesDataset(write_synthetic(tmp_path, 1))
    batch = DiaCollator(model.config.delay_pattern, 48, 24, text_dropout=0.0, seed=0)([data[0]])
    with torch.no_grad():
        assert torch.isfinite(model(**{k: batch[k] for k in MODEL_INPUTS}).loss)


@pytest.mark.parametrize(
    "settings",
    [["codebook_weights=[1,0,0,0,0,0,0,0,0]"], ["loss_on_audio_tokens_only=true"]],
    ids=["codebook_weights", "audio_tokens_only"],
)
@bug_on_unpatched  # the program stops at the state on the published release
def test_evaluation_uses_the_training_loss(tmp_path, settings):
    # with a learning rate of 0 the weights never change: only the loss itself can move the eval loss
    from tests.demo_utils import assert_ok, run_demo, summary

    common = ["max_steps=1", "learning_rate=0", "eval_strategy=no", "save_strategy=no", "warmup_steps=0"]
    assert_ok(run_demo(tmp_path / "plain", *common, launcher=False))
    assert_ok(run_demo(tmp_path / "weighted", *common, *settings, launcher=False))
    assert summary(tmp_path / "weighted")["eval_loss"] != pytest.approx(summary(tmp_path / "plain")["eval_loss"])
