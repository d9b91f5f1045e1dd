"""docs/MATRIX.md from recorded scenarios: a row per release at a glance, and every scenario that broke the promise."""

import re

import transformers

from harness import matrix_report
from harness.pins import committed_series, load_pins, newest
from harness.scenarios import all_scenarios, load, promised, record
from tests.testing_utils import PATCHED, ROOT


def test_report_counts_the_promise_and_names_what_broke_it(tmp_path, monkeypatch):
    log = tmp_path / "reports/patched.jsonl"
    monkeypatch.setenv("SCENARIO_LOG", str(log))
    scenarios = all_scenarios()
    for policy, state, arguments in scenarios:
        record("scenario", policy=policy, state=state, arguments=arguments, device="cpu",
               outcome=promised(policy, arguments, "cpu", PATCHED, maker=state))  # fmt: skip
    broken = next(s for s in scenarios if promised(s[0], s[2], "cpu", PATCHED, maker=s[1]) == "reset")
    record("scenario", policy=broken[0], state=broken[1], arguments=broken[2], device="cpu", outcome="kept")
    record("suite", exitstatus=1, passed=245, failed=1, error=0, xfailed=0, xpassed=0, skipped=9)

    rows = load(tmp_path / "reports")
    assert {row["env"] for row in rows} == {"patched"} and len(rows) == len(scenarios) + 2
    out = tmp_path / "MATRIX.md"
    out.write_text("# kept by hand\n")
    assert matrix_report.main([str(tmp_path / "reports"), str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# kept by hand\n")
    version = transformers.__version__
    suite = "**FAILED** (1 failed, 245 passed, 9 skipped)"
    count = f"{len(scenarios) - 1}/{len(scenarios)}"
    if PATCHED:
        assert f"| {version} | cpu | {suite} | – | {count} | – | yes |" in text
    else:
        assert f"| {version} | cpu | – | {suite} | – | " in text
    label = "patched" if PATCHED else "published"
    assert f"| {version} {label} | cpu | {' | '.join(broken)} | kept | reset |" in text
    assert "None." not in text


def test_no_logs_is_an_error_not_an_empty_report(tmp_path, capsys):
    assert matrix_report.main([str(tmp_path), str(tmp_path / "MATRIX.md")]) == 1
    assert "no scenario logs" in capsys.readouterr().err and not (tmp_path / "MATRIX.md").exists()


def test_matrix_page_has_a_row_for_every_release_the_matrix_runs():
    """docs/MATRIX.md is stale when a pin comes or goes: its scenario table needs a fresh `tox -m matrix`, its series
    table a fresh `tox -e applies`."""
    text = (ROOT / "docs/MATRIX.md").read_text()
    scenarios, applies = (text.split(f"<!-- begin {name} (generated) -->")[1].split(f"<!-- end {name} -->")[0]
                          for name in ("scenarios", "applies"))  # fmt: skip
    rows = re.findall(r"^\| (\d[\d.]*) \| (cpu|xla) \|", scenarios, flags=re.MULTILINE)
    assert [release for release, device in rows if device == "cpu"] == committed_series()
    assert [release for release, device in rows if device == "xla"] == [newest()]  # the tpu env's pin
    assert f"out of {matrix_report.TOTAL} " in scenarios
    series = re.findall(r"^\| (\d[\d.]*) \| yes \| F\d+ \| (yes)? \|", applies, flags=re.MULTILINE)
    assert [release for release, _ in series] == list(load_pins())
    assert [release for release, suite in series if suite] == committed_series()
