"""XLA compilations and transfers per phase, without torch_xla: off XLA nothing is read, on XLA (a fake accelerator
and a fake metrics counter) each mark charges what happened since the previous mark to its phase."""

from types import SimpleNamespace

import pytest
from accelerate.utils import DistributedType

import tpu_demo.runtime.xla_counters
from tests.testing_utils import require_dia
from tpu_demo.runtime.xla_counters import XlaCounters

pytestmark = require_dia


class FakeCounts:
    """torch_xla's process totals (compilations, device-to-host transfers), as the test moves them on."""

    def __init__(self, compilations=0, transfers=0):
        self.now = (compilations, transfers)

    def add(self, compilations, transfers):
        self.now = (self.now[0] + compilations, self.now[1] + transfers)

    def __call__(self):
        return self.now


def on(distributed_type):
    return SimpleNamespace(distributed_type=distributed_type)


@pytest.fixture
def fake_counts(monkeypatch):
    counts = FakeCounts(compilations=40, transfers=7)  # what earlier phases (model loading) left: not charged
    monkeypatch.setattr(tpu_demo.runtime.xla_counters, "counts", counts)
    return counts


def unread():
    raise AssertionError("torch_xla's metrics read off XLA")


@pytest.mark.parametrize(
    "distributed_type",
    [DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU, DistributedType.FSDP],
)
def test_off_xla_nothing_is_counted_or_read(monkeypatch, distributed_type):
    monkeypatch.setattr(tpu_demo.runtime.xla_counters, "counts", unread)
    counters = XlaCounters(on(distributed_type), warmup_steps=3)
    counters.mark("train")
    assert not counters.enabled
    assert counters.compilations() is None and counters.summary() is None
    assert counters.phases == {}


def test_compilations_are_the_process_total(fake_counts):
    counters = XlaCounters(on(DistributedType.XLA), warmup_steps=1)
    fake_counts.add(5, 0)
    assert counters.enabled and counters.compilations() == 45


def test_each_mark_charges_what_happened_since_the_last_mark_to_its_phase(fake_counts):
    counters = XlaCounters(on(DistributedType.XLA), warmup_steps=2)
    marks = [  # phase, compilations and transfers since the previous mark
        ("train", 3, 1),  # warm-up step 1
        ("train", 2, 1),  # warm-up step 2
        ("eval", 4, 2),  # first evaluation
        ("train", 1, 1),  # a later step: a recompilation
        ("save", 0, 5),
        ("train", 0, 1),
        ("eval", 0, 2),
    ]
    for phase, compiled, transferred in marks:
        fake_counts.add(compiled, transferred)
        counters.mark(phase)
    assert counters.summary() == {
        "train": {
            "first_calls": 2,
            "calls": 4,
            "calls_later": 2,
            "compilations_first": 5,
            "compilations_later": 1,
            "transfers_first": 2,
            "transfers_later": 2,
            "recompiled": [{"call": 3, "graphs": []}],
        },
        "eval": {
            "first_calls": 1,
            "calls": 2,
            "calls_later": 1,
            "compilations_first": 4,
            "compilations_later": 0,
            "transfers_first": 2,
            "transfers_later": 2,
        },
        "save": {
            "first_calls": 1,
            "calls": 1,
            "calls_later": 0,
            "compilations_first": 0,
            "compilations_later": 0,
            "transfers_first": 5,
            "transfers_later": 0,
        },
    }


@pytest.mark.parametrize("warmup_steps, first", [(0, 0), (1, 1), (3, 3), (10, 4)])
def test_train_counts_its_warmup_steps_as_first_calls(fake_counts, warmup_steps, first):
    counters = XlaCounters(on(DistributedType.XLA), warmup_steps=warmup_steps)
    for _ in range(4):
        fake_counts.add(1, 10)
        counters.mark("train")
    train = counters.summary()["train"]
    assert train["first_calls"] == warmup_steps and train["calls"] == 4
    assert (train["compilations_first"], train["compilations_later"]) == (first, 4 - first)
    assert (train["transfers_first"], train["transfers_later"]) == (10 * first, 10 * (4 - first))


def test_a_phase_never_marked_is_not_in_the_summary(fake_counts):
    counters = XlaCounters(on(DistributedType.XLA), warmup_steps=1)
    assert counters.summary() == {}


def test_a_shape_first_met_late_is_warm_up_and_so_is_the_mark_after_it(fake_counts):
    """Length buckets: a graph named for the first time compiles, at its mark or (run late, at the next batch) at
    the next; a graph named before that compiles again is a recompilation, charged to its shape."""
    counters = XlaCounters(on(DistributedType.XLA), warmup_steps=1)
    marks = [  # compilations since the previous mark, the graphs the mark names, its shape
        (2, [(16, 8, True)], (16, 8)),  # warm-up
        (0, [(16, 8, True)], (16, 8)),
        (0, [(24, 16, True)], (24, 16)),  # a new shape: its graph runs at the next batch
        (1, [(16, 8, True)], (16, 8)),  # ... so this compilation is its warm-up
        (1, [(24, 16, True)], (24, 16)),  # nothing new: compiled again
    ]
    for compiled, graphs, shape in marks:
        fake_counts.add(compiled, 0)
        counters.mark("train", graphs=graphs, shape=shape)
    train = counters.summary()["train"]
    assert (train["compilations_first"], train["compilations_later"]) == (3, 1)
    assert train["shapes"]["16x8"] == {"calls": 3, "compilations_first": 3, "compilations_later": 0}
    assert train["shapes"]["24x16"] == {"calls": 2, "compilations_first": 0, "compilations_later": 1}
    assert train["recompiled"] == [{"call": 5, "graphs": [[24, 16, True]]}]


def test_the_first_step_after_another_phase_is_a_graph_of_its_own(fake_counts):
    counters = XlaCounters(on(DistributedType.XLA), warmup_steps=1)
    for phase, compiled in (
        ("train", 2),
        ("train", 0),
        ("eval", 3),
        ("train", 1),
        ("train", 0),
        ("eval", 0),
        ("train", 0),
    ):
        fake_counts.add(compiled, 0)
        counters.mark(phase, graphs=[(16, 8, True)] if phase == "train" else ())
    assert counters.summary()["train"]["compilations_later"] == 0
