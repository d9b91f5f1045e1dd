"""Checkpoints without a training run: folder names and order, resume targets, the corruption check, rotation, the
host-side weight load, and a save/load round trip on a one-process CPU Accelerator with a tiny Dia."""

import hashlib
import re
from pathlib import Path

import pytest
import torch
from accelerate.utils import SAFE_WEIGHTS_NAME, WEIGHTS_NAME
from safetensors.torch import save_file

from tests.testing_utils import require_dia
from tpu_demo.errors import FineTuneError
from tpu_demo.model.lora import ADAPTER_WEIGHTS
from tpu_demo.outputs import checkpoint_dir, step_dirs
from tpu_demo.training.checkpoint import (
    CHECKSUMS,
    load_checkpoint,
    load_model_weights_on_host,
    resolve_resume,
    rotate_checkpoints,
    save_checkpoint,
    save_final,
    verify_checkpoint,
    verify_checksums,
    write_checksums,
)

pytestmark = require_dia

PAYLOAD = bytes([7]) * 64  # the stored bytes of every tensor `whole_checkpoint` writes: found again to flip one


def make_steps(output_dir, *steps):
    for step in steps:
        checkpoint_dir(output_dir, step).mkdir(parents=True)


def names(paths):
    return [path.name for path in paths]


def write_weights(state: dict, file) -> None:
    if str(file).endswith(".safetensors"):
        save_file(state, file)
    else:
        torch.save(state, file)


def whole_checkpoint(path, weights=SAFE_WEIGHTS_NAME):
    """What `save_state` writes for a model, an optimizer, a scaler and the RNG, by hand (torch files are zips)."""
    path.mkdir(parents=True)
    write_weights({"w": torch.full((64,), 7, dtype=torch.uint8)}, path / weights)
    for name in ("optimizer.bin", "scheduler.bin", "random_states_0.pkl", "scaler.pt"):
        torch.save({"state": torch.full((64,), 7, dtype=torch.uint8)}, path / name)
    (path / "config.json").write_text("{}")
    return path


def truncate(file):
    file.write_bytes(file.read_bytes()[:-4])


def flip_a_data_byte(file):
    data = bytearray(file.read_bytes())
    at = data.find(PAYLOAD)
    assert at >= 0, f"no tensor payload in {file}"
    data[at + 10] ^= 0xFF
    file.write_bytes(bytes(data))


def huge_header(file):
    # safetensors' first 8 bytes are the header's length
    file.write_bytes((2**40).to_bytes(8, "little") + file.read_bytes()[8:])


# folder names


@pytest.mark.parametrize("as_text", [True, False])
def test_checkpoint_dir_is_step_n_under_checkpoints(tmp_path, as_text):
    output_dir = str(tmp_path) if as_text else tmp_path
    assert checkpoint_dir(output_dir, 12) == tmp_path / "checkpoints" / "step-12"


def test_step_dirs_are_in_numeric_order_and_ignore_other_entries(tmp_path):
    # lexical order would put step-10 before step-9, and `latest` and rotation would pick the wrong checkpoint
    make_steps(tmp_path, 10, 9, 100, 2)
    (tmp_path / "checkpoints" / "final").mkdir()
    assert names(step_dirs(tmp_path / "checkpoints")) == ["step-2", "step-9", "step-10", "step-100"]


def test_step_dirs_of_a_missing_folder_is_empty(tmp_path):
    assert step_dirs(tmp_path / "nothing") == []


# resume targets


def test_resume_latest_is_the_highest_step(tmp_path):
    make_steps(tmp_path, 9, 10, 2)
    assert resolve_resume("latest", tmp_path) == tmp_path / "checkpoints" / "step-10"


@pytest.mark.parametrize("folder_exists", [True, False])
def test_resume_latest_without_checkpoints_names_the_folder(tmp_path, folder_exists):
    if folder_exists:
        (tmp_path / "checkpoints").mkdir()
    with pytest.raises(FineTuneError, match=re.escape(f"latest, but {tmp_path}/checkpoints has none")):
        resolve_resume("latest", tmp_path)


def test_resume_from_a_folder_is_that_folder(tmp_path):
    make_steps(tmp_path, 3)
    assert resolve_resume(str(tmp_path / "checkpoints/step-3"), "unused") == tmp_path / "checkpoints/step-3"


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_resume_from_a_path_that_is_not_a_folder_is_refused(tmp_path, kind):
    path = tmp_path / "step-3"
    if kind == "file":
        path.write_text("")
    with pytest.raises(FineTuneError, match=re.escape(f"resume_from_checkpoint {path} is not a checkpoint directory")):
        resolve_resume(str(path), tmp_path)


# the corruption check


@pytest.mark.parametrize("weights", [SAFE_WEIGHTS_NAME, WEIGHTS_NAME, ADAPTER_WEIGHTS])
def test_a_whole_checkpoint_passes(tmp_path, weights):
    verify_checkpoint(whole_checkpoint(tmp_path / "step-1", weights))


def test_a_checkpoint_without_weights_names_the_files_it_lacks(tmp_path):
    path = whole_checkpoint(tmp_path / "step-1")
    (path / SAFE_WEIGHTS_NAME).unlink()
    message = (
        f"cannot resume from {path}: it has no model.safetensors, pytorch_model.bin, adapter_model.safetensors or "
        "pytorch_model_fsdp_0/.metadata (a sharded run's)"
    )
    with pytest.raises(FineTuneError, match=re.escape(message)):
        verify_checkpoint(path)


@pytest.mark.parametrize(
    "weights, broken, damage",
    [
        (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_NAME, truncate),
        (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_NAME, huge_header),
        (ADAPTER_WEIGHTS, ADAPTER_WEIGHTS, truncate),
        (WEIGHTS_NAME, WEIGHTS_NAME, flip_a_data_byte),
        (SAFE_WEIGHTS_NAME, "optimizer.bin", flip_a_data_byte),
        (SAFE_WEIGHTS_NAME, "optimizer.bin", truncate),
        (SAFE_WEIGHTS_NAME, "random_states_0.pkl", flip_a_data_byte),
        (SAFE_WEIGHTS_NAME, "scaler.pt", flip_a_data_byte),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_a_damaged_file_is_reported_corrupt_by_name(tmp_path, weights, broken, damage):
    # a half-written checkpoint (a disk that filled up, a killed save) must not be read as a failing load
    path = whole_checkpoint(tmp_path / "step-1", weights)
    damage(path / broken)
    with pytest.raises(FineTuneError, match=re.escape(f"cannot resume from {path}: {broken} is corrupt")):
        verify_checkpoint(path)


# rotation


@pytest.mark.parametrize(
    "limit, kept",
    [
        (1, ["step-10"]),
        (2, ["step-9", "step-10"]),
        (3, ["step-4", "step-9", "step-10"]),
        (5, ["step-2", "step-4", "step-9", "step-10"]),
    ],
    ids=["limit_1", "limit_2", "limit_3", "limit_5"],
)
def test_rotation_keeps_the_newest_by_step(tmp_path, limit, kept):
    make_steps(tmp_path, 2, 9, 10, 4)
    rotate_checkpoints(tmp_path, limit)
    assert names(step_dirs(tmp_path / "checkpoints")) == kept


def test_rotation_without_checkpoints_does_nothing(tmp_path):
    rotate_checkpoints(tmp_path, 1)
    assert not (tmp_path / "checkpoints").exists()


# weights read on the host


@pytest.mark.parametrize("saved_as", [SAFE_WEIGHTS_NAME, WEIGHTS_NAME])
def test_host_load_copies_each_models_own_file(tmp_path, saved_as):
    # accelerate names the second model's weights model_1.*: each model must get its own
    torch.manual_seed(0)
    saved = [torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)]
    write_weights(saved[0].state_dict(), tmp_path / saved_as)
    write_weights(saved[1].state_dict(), tmp_path / saved_as.replace(".", "_1."))
    models = [torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)]
    loaded = list(models)
    load_model_weights_on_host(models, tmp_path)
    assert models == []  # accelerate's list: emptied, so accelerate loads no weights after the hook
    for model, original in zip(loaded, saved, strict=True):
        for name, tensor in original.state_dict().items():
            assert torch.equal(model.state_dict()[name], tensor), name


def test_host_load_of_another_models_weights_does_not_fit(tmp_path):
    save_file(torch.nn.Linear(3, 2).state_dict(), tmp_path / SAFE_WEIGHTS_NAME)
    with pytest.raises(FineTuneError, match=re.escape(f"cannot resume from {tmp_path}: its weights do not fit")):
        load_model_weights_on_host([torch.nn.Linear(4, 2)], tmp_path)


def test_host_load_of_a_checkpoint_without_this_models_weights_is_refused(tmp_path):
    # an adapter-only (LoRA) checkpoint resumed as full fine-tuning ended in a FileNotFoundError traceback
    (tmp_path / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(FineTuneError, match=re.escape(f"cannot resume from {tmp_path}: it has no weights for this")):
        load_model_weights_on_host([torch.nn.Linear(4, 2)], tmp_path)


# a round trip through a real Accelerator


class Counter:
    """An object registered for checkpointing, as the fine-tune registers its progress (custom_checkpoint_0.pkl)."""

    def __init__(self):
        self.step = 0

    def state_dict(self):
        return {"step": self.step}

    def load_state_dict(self, state):
        self.step = state["step"]


def take_step(model, optimizer, counter):
    for parameter in model.parameters():
        parameter.grad = torch.randn_like(parameter)
    optimizer.step()
    optimizer.zero_grad()
    counter.step += 1


@pytest.fixture
def training(accelerator):
    from transformers import DiaForConditionalGeneration

    from tpu_demo.model.dia import tiny_config

    torch.manual_seed(0)
    model = DiaForConditionalGeneration(tiny_config())
    model, optimizer = accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.01))
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    take_step(model, optimizer, counter)  # optimizer state that a load must bring back
    return model, optimizer, counter


def cloned(state):
    if isinstance(state, torch.Tensor):
        return state.clone()
    if isinstance(state, dict):
        return {key: cloned(value) for key, value in state.items()}
    return state


def assert_same(state, other):
    if isinstance(state, torch.Tensor):
        assert torch.equal(state, other)
    elif isinstance(state, dict):
        assert state.keys() == other.keys()
        for key in state:
            assert_same(state[key], other[key])
    else:
        assert state == other


def test_a_checkpoint_brings_back_weights_optimizer_objects_and_rng(accelerator, training, tmp_path):
    model, optimizer, counter = training
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, model, path)
    weights, optimizer_state = cloned(model.state_dict()), cloned(optimizer.state_dict())
    draw = torch.rand(4)  # the RNG as saved: the same draw after the load
    take_step(model, optimizer, counter)
    load_checkpoint(accelerator, path)
    assert_same(model.state_dict(), weights)
    assert_same(optimizer.state_dict(), optimizer_state)
    assert counter.step == 1
    assert torch.equal(torch.rand(4), draw)


def test_a_checkpoint_loads_with_from_pretrained(accelerator, training, tmp_path):
    # `python -m tpu_demo.generate checkpoints/step-N` reads it as a model folder
    from transformers import DiaForConditionalGeneration

    model = training[0]
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, model, path)
    assert {"config.json", "generation_config.json", SAFE_WEIGHTS_NAME} <= set(names(path.iterdir()))
    assert_same(DiaForConditionalGeneration.from_pretrained(path).state_dict(), model.state_dict())


def test_a_corrupt_checkpoint_is_refused_before_anything_loads(accelerator, training, tmp_path):
    model, optimizer, counter = training
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, model, path)
    take_step(model, optimizer, counter)
    weights = cloned(model.state_dict())
    truncate(path / "optimizer.bin")
    with pytest.raises(FineTuneError, match="optimizer.bin is corrupt"):
        load_checkpoint(accelerator, path)
    assert_same(model.state_dict(), weights)
    assert counter.step == 2


def overwrite_tensor_data(file):
    """Bytes of a tensor overwritten in place (0xFF reads as NaN): the header and the size stay whole."""
    data = bytearray(file.read_bytes())
    data[-200:-100] = b"\xff" * 100
    file.write_bytes(bytes(data))


def test_a_checkpoint_lists_the_sha256_of_every_file(accelerator, training, tmp_path):
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, training[0], path)
    listed = dict(line.split("  ")[::-1] for line in (path / CHECKSUMS).read_text().splitlines())  # sha256sum's form
    files = {str(file.relative_to(path)) for file in path.rglob("*") if file.is_file() and file.name != CHECKSUMS}
    assert set(listed) == files and SAFE_WEIGHTS_NAME in files
    for name, digest in listed.items():
        assert hashlib.sha256((path / name).read_bytes()).hexdigest() == digest, name


def test_hosts_sharing_a_disk_do_not_list_each_others_checksums_while_written(tmp_path):
    # two machines on one disk write checksums into the same folder at once: the other's file being written is renamed
    # away while this one lists the folder (CI: a two-machine save died on its vanished file)
    (tmp_path / "model.safetensors").write_bytes(PAYLOAD)
    being_written = tmp_path / f".{CHECKSUMS}.4242"
    being_written.write_text("")
    write_checksums(tmp_path)
    being_written.replace(tmp_path / "other_host.tmp")
    (tmp_path / "other_host.tmp").unlink()
    assert [line.split("  ")[1] for line in (tmp_path / CHECKSUMS).read_text().splitlines()] == ["model.safetensors"]
    verify_checksums(tmp_path)


@pytest.mark.parametrize("broken", [SAFE_WEIGHTS_NAME, "custom_checkpoint_0.pkl"])
def test_data_overwritten_inside_a_file_is_refused_by_its_checksum(accelerator, training, tmp_path, broken):
    # a whole header and the right size: only the bytes differ (a NaN model resumed and trained on as NaN)
    model, optimizer, counter = training
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, model, path)
    take_step(model, optimizer, counter)
    weights = cloned(model.state_dict())
    overwrite_tensor_data(path / broken)
    message = f"cannot resume from {path}: {broken} is corrupt (its sha256 is not the one saved with it)"
    with pytest.raises(FineTuneError, match=re.escape(message)):
        load_checkpoint(accelerator, path)
    assert_same(model.state_dict(), weights)
    assert counter.step == 2


def test_a_file_the_checksums_list_is_missing_is_named(accelerator, training, tmp_path):
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, training[0], path)
    (path / "scheduler.bin").unlink(missing_ok=True)
    (path / "random_states_0.pkl").unlink()
    with pytest.raises(FineTuneError, match=re.escape(f"{path}: random_states_0.pkl is missing")):
        load_checkpoint(accelerator, path)


def test_a_damaged_checksums_file_is_named(accelerator, training, tmp_path):
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, training[0], path)
    overwrite_tensor_data(path / CHECKSUMS)
    with pytest.raises(FineTuneError, match=re.escape(f"cannot resume from {path}: {CHECKSUMS} is corrupt")):
        load_checkpoint(accelerator, path)


def test_non_finite_weights_without_checksums_are_refused(accelerator, training, tmp_path):
    # a checkpoint written before checksums were: weights that are NaN are no start for training
    model, optimizer, counter = training
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, model, path)
    (path / CHECKSUMS).unlink()
    overwrite_tensor_data(path / SAFE_WEIGHTS_NAME)
    with pytest.raises(FineTuneError, match=re.escape(f"cannot resume from {path}: its weights hold NaN or inf")):
        load_checkpoint(accelerator, path)


def test_save_final_writes_a_model_folder(accelerator, training, tmp_path):
    from transformers import DiaForConditionalGeneration

    model = training[0]
    save_final(accelerator, model, tmp_path / "final")
    assert {"config.json", "generation_config.json", SAFE_WEIGHTS_NAME} <= set(names((tmp_path / "final").iterdir()))
    assert_same(DiaForConditionalGeneration.from_pretrained(tmp_path / "final").state_dict(), model.state_dict())


def test_a_missing_file_is_named(accelerator, training, tmp_path):
    model = training[0]
    path = checkpoint_dir(tmp_path, 1)
    save_checkpoint(accelerator, model, path)
    (path / "optimizer.bin").unlink()
    files = sorted(path.iterdir())
    with pytest.raises(FineTuneError, match=r"step-1: optimizer.bin is missing; resume from another checkpoint$"):
        load_checkpoint(accelerator, path)
    assert sorted(path.iterdir()) == files


def test_a_save_cut_short_is_no_checkpoint(accelerator, training, tmp_path, monkeypatch):
    # a pre-empted host or a kill during the save: its files are part written, the last whole checkpoint is latest
    model, optimizer, counter = training
    save_checkpoint(accelerator, model, checkpoint_dir(tmp_path, 1))
    take_step(model, optimizer, counter)

    def killed_while_writing(output_dir, **kwargs):
        (Path(output_dir) / "model.safetensors").parent.mkdir(parents=True, exist_ok=True)
        (Path(output_dir) / "model.safetensors").write_bytes(b"\0" * 10)
        raise KeyboardInterrupt

    monkeypatch.setattr(accelerator, "save_state", killed_while_writing)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(accelerator, model, checkpoint_dir(tmp_path, 2))
    assert names(step_dirs(tmp_path / "checkpoints")) == ["step-1"]
    assert resolve_resume("latest", tmp_path) == checkpoint_dir(tmp_path, 1)
    monkeypatch.undo()
    save_checkpoint(accelerator, model, checkpoint_dir(tmp_path, 2))  # the same step saved again, whole
    assert names((tmp_path / "checkpoints").iterdir()) == ["step-1", "step-2"]
    verify_checkpoint(checkpoint_dir(tmp_path, 2))
