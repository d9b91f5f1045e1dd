"""`python -m tpu_demo.report`: one HTML page comparing runs, checked as a browser shows it (headless Chromium, where
installed: Debian's `chromium`) against what the runs' files hold."""

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.demo_utils import assert_ok, metrics, run_demo, run_main, summary, tiny_codec
from tests.testing_utils import bug_on_unpatched, require_dia

pytestmark = [require_dia, pytest.mark.xdist_group("report_runs")]
BROWSER = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class Elements(HTMLParser):
    """Every element of a page as (tag, attributes), and the text of each table row."""

    def __init__(self, page: str):
        super().__init__()
        self.elements, self.rows, self._row = [], [], None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "tr":
            self._row = (dict(attrs), [])
            self.rows.append(self._row)

    def handle_data(self, data):
        if self._row is not None and data.strip():
            self._row[1].append(data.strip())

    def find(self, tag, **attrs):
        return [a for t, a in self.elements if t == tag and all(a.get(k) == v for k, v in attrs.items())]


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    pytest.importorskip("soundfile")
    root = tmp_path_factory.mktemp("report")
    codec = tiny_codec(root / "codec")
    runs = []
    for name, rate in (("fast", "0.003"), ("slow", "0.0003")):
        settings = ["max_steps=4", "logging_steps=1", "eval_steps=2", "save_steps=4", f"learning_rate={rate}",
                    f"codec={codec}", 'sample_prompts=["[S1] Hello there.", "[S2] Bye."]', "sample_every=2",
                    "sample_max_frames=8"]  # fmt: skip
        assert_ok(run_demo(root / name, *settings, launcher=False))
        runs.append(root / name)
    return runs


def shown(page: Path) -> Elements:
    """The page's DOM as headless Chromium built it."""
    if BROWSER is None:
        pytest.skip("needs a headless Chromium (apt-get install chromium)")
    dom = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert "<svg" in dom, dom[:500]
    return Elements(dom)


@bug_on_unpatched
def test_two_runs_side_by_side_show_what_their_files_hold(two_runs, tmp_path):
    from tpu_demo.report import main

    page = tmp_path / "pages" / "compare.html"
    assert_ok(run_main(main, [*two_runs, "--out", page]))
    dom = shown(page)
    for run in two_runs:
        # a line per curve, with a point for each value logged: training losses, evaluation losses
        for chart in ("loss", "eval_loss"):
            points = [line["data-points"] for line in dom.find("polyline", **{"data-run": run.name})]
            assert str(len([m for m in metrics(run) if chart in m])) in points
        # a player per sample written that finds its WAV from where the page is
        players = [a["src"] for a in dom.find("audio") if f"/{run.name}/" in a["src"]]
        assert len(players) == 4 and all((page.parent / src).is_file() for src in players)
        (row,) = [cells for attrs, cells in dom.rows if attrs.get("data-run") == run.name]
        assert row[0] == run.name and str(summary(run)["steps"]) in row
    assert len([attrs for attrs, _ in dom.rows if attrs.get("data-step")]) == 8  # 2 runs x 2 steps x 2 prompts
    assert {a["data-metric"] for a in dom.find("svg")} >= {"loss", "eval_loss"}


@bug_on_unpatched
def test_one_run_writes_its_page_into_its_folder_and_names_the_broken_samples(two_runs):
    from tpu_demo.report import main

    run = two_runs[0]
    result = run_main(main, [run])
    assert_ok(result)
    page = run / "report.html"
    assert result.stdout.strip() == str(page)
    dom = shown(page)
    health = {
        (m["step"], n): m[f"sample/prompt-{n}/problems"] for m in metrics(run) for n in (1, 2)
        if f"sample/prompt-{n}/problems" in m
    }  # fmt: skip
    rows = {
        (int(a["data-step"]), int(a["data-prompt"])): (a["class"], cells)
        for a, cells in dom.rows
        if a.get("data-step")
    }
    assert rows.keys() == health.keys()
    for key, problems in health.items():
        assert rows[key][0] == ("broken" if problems else "healthy")
        assert not problems or problems in rows[key][1]


def test_a_folder_that_is_not_a_run_is_named(tmp_path):
    from tpu_demo.report import main

    result = run_main(main, [tmp_path])
    assert result.returncode == 1 and result.stderr.startswith(f"tpu_demo: {tmp_path}: no metrics.jsonl")


@pytest.mark.parametrize("content", ["", "\n\n", '{"step": 3, "lo'])
def test_a_run_that_logged_nothing_is_named(tmp_path, content):
    from tpu_demo.report import main

    (tmp_path / "metrics.jsonl").write_text(content)
    result = run_main(main, [tmp_path])
    assert result.returncode == 1 and "no logged step" in result.stderr and not (tmp_path / "report.html").exists()
