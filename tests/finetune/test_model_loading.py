"""`model:` names Dia weights in transformers format (a folder or a hub id) and the dtype they load in."""

import pytest
import torch

from tests.testing_utils import require_dia
from tpu_demo.errors import FineTuneError

pytestmark = require_dia


def test_a_saved_dia_loads_in_the_asked_dtype(tmp_path):
    from transformers import DiaForConditionalGeneration

    from tpu_demo.config.arguments import ModelArguments
    from tpu_demo.model.dia import build_model, model_config, tiny_config

    DiaForConditionalGeneration(tiny_config(hidden_size=32, layers=1)).save_pretrained(tmp_path / "dia")
    args = ModelArguments(model=str(tmp_path / "dia"), dtype="bfloat16")
    model = build_model(args)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model_config(args).decoder_config.hidden_size == 32


def test_a_model_that_is_not_there_is_named(tmp_path, monkeypatch):
    from tpu_demo.config.arguments import ModelArguments
    from tpu_demo.model.dia import build_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # a relative name transformers tries as a folder, then as a hub id (4.x: invalid)
    with pytest.raises(FineTuneError, match="model .*nowhere: not a Dia folder in transformers format"):
        build_model(ModelArguments(model="models/dia/nowhere"))
    with pytest.raises(FineTuneError, match=f"^model {tmp_path}/nowhere: no such folder$"):  # a path: not a hub id
        build_model(ModelArguments(model=str(tmp_path / "nowhere")))


def test_a_dtype_that_is_not_offered_is_refused():
    from tpu_demo.config.arguments import ModelArguments

    with pytest.raises(FineTuneError, match="dtype: 'int8' is not one of float32, bfloat16, float16"):
        ModelArguments(dtype="int8")


def test_the_real_run_config_parses():
    from tests.testing_utils import ROOT
    from tpu_demo.config.load import load_raw, parse_all

    config = parse_all(load_raw(ROOT / "tpu_demo/configs/dia-1.6b.yaml"))
    launch, model, data, loss, training = config.launch, config.model, config.data, config.loss, config.training
    assert (launch.mixed_precision, model.model) == ("bf16", "nari-labs/Dia-1.6B-0626")
    assert data.codec == "descript/dac_44khz"
    assert len(loss.codebook_weights) == 9 and data.max_audio_frames == 1720
    assert training.per_device_train_batch_size * training.gradient_accumulation_steps == 16
