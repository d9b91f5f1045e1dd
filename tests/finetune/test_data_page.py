"""The data page (tpu_demo.segmenting.page): segment_report.html beside metadata.csv, checked as a browser shows it
(headless Chromium, where installed) against the report: every kept clip with its player, the least confident
first, every drop with its reason and a player over its recording, the histograms and the speakers."""

import json

import numpy as np
import pytest

from tests import planted_faults
from tests.finetune.test_report import shown
from tests.finetune.test_segmenting import assert_ok, segment_command, user_recordings
from tests.testing_utils import require_dia

pytestmark = require_dia
soundfile = pytest.importorskip("soundfile", reason="audio needs soundfile and soxr (pip install soundfile soxr)")


@pytest.mark.xdist_group("segment")
def test_the_data_page_shows_every_clip_kept_and_dropped_with_a_player(tmp_path):
    raw = user_recordings(tmp_path / "podcast")  # alice's take2 without its text: its clips to review
    samples, found = planted_faults.talk(planted_faults.SENTENCES[:3], planted_faults.VOICES["bob"], 16000, seed=5)
    noisy = planted_faults.add_noise(samples, found, 16000, snr_db=6.0)
    soundfile.write(raw / "bob" / "street.wav", noisy, 16000)
    (raw / "bob" / "street.txt").write_text(" ".join(planted_faults.SENTENCES[:3]))
    out = tmp_path / "clips"
    result = segment_command(out, f"recordings={raw}")
    assert_ok(result)
    assert f"to listen to them: {out / 'segment_report.html'}" in result.stdout
    report = json.loads((out / "segment_report.json").read_text())
    kept = [clip for clip in report["clips"] if not clip["dropped"]]
    dropped = [clip for clip in report["clips"] if clip["dropped"]]
    assert kept and dropped and any(clip["review"] for clip in kept)

    page = shown(out / "segment_report.html")
    rows = [(attrs, cells) for attrs, cells in page.rows if attrs.get("class") == "kept"]
    assert sorted(attrs["data-audio"] for attrs, _ in rows) == sorted(clip["audio"] for clip in kept)
    players = {a["src"] for a in page.find("audio")}
    assert {clip["audio"] for clip in kept} <= players and all((out / clip["audio"]).is_file() for clip in kept)
    where = sorted((cells[3], cells[4]) for _, cells in rows)  # each clip's recording and where in it it starts
    assert where == sorted((clip["recording"], f"{clip['start']:.2f}") for clip in kept)
    confidences = [cells[1] for _, cells in rows]  # the player has no text: text, confidence, ...
    unchecked = [c for c in confidences if c.startswith("unchecked transcript")]
    assert confidences[: len(unchecked)] == unchecked  # the least confident first
    assert [float(c) for c in confidences[len(unchecked) :]] == sorted(float(c) for c in confidences[len(unchecked) :])

    drops = [(attrs, cells) for attrs, cells in page.rows if attrs.get("class") == "dropped"]
    assert sorted(attrs["data-reason"] for attrs, _ in drops) == sorted(clip["dropped"] for clip in dropped)
    street = [src for src in players if src.startswith("../podcast/bob/street.wav#t=")]
    assert street and all((out / src.split("#")[0]).resolve().is_file() for src in street)

    assert {svg["data-measure"] for svg in page.find("svg", **{"class": "histogram"})} == {
        "seconds", "snr_db", "ovrl", "pace"
    }  # fmt: skip
    speakers = [cells[0] for attrs, cells in page.rows if attrs.get("class") == "speaker"]
    assert speakers == list(report["speakers"])
    assert np.isclose(sum(clip["end"] - clip["start"] for clip in kept), report["kept"]["seconds"], atol=0.05)


def test_the_data_page_names_each_recording_it_could_not_read(tmp_path):
    # a corrupt and an empty recording were named on the console and in segment_report.json only: the page said
    # "0 dropped", as if every recording had been read
    from tests.finetune.test_report import Elements
    from tpu_demo.segmenting.page import write_page

    skipped = {"corrupt.wav": "truncated: its header says 2958560 bytes of audio, the file holds 20000",
               "empty.wav": "unreadable audio (Format not recognised.)"}  # fmt: skip
    page = write_page({"clips": [], "speakers": {}, "skipped": skipped}, tmp_path, {})
    dom = Elements(page.read_text(encoding="utf-8"))
    rows = [cells for attrs, cells in dom.rows if attrs.get("class") == "unread"]
    assert rows == [[name, reason] for name, reason in sorted(skipped.items())]
    assert "2 recordings not read" in page.read_text(encoding="utf-8")
