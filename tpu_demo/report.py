"""One HTML page that compares fine-tunes at a glance: curves, sample health and players, for one run or several.

Loss curves (training and evaluation), error rates, the health of every sample by step, and players for the samples.
Plain HTML and inline SVG: it opens from disk, offline.

    python -m tpu_demo.report outputs/run-a                       # writes outputs/run-a/report.html
    python -m tpu_demo.report outputs/run-a outputs/run-b --out compare.html
"""

import html
import json
import os
import sys
from pathlib import Path

from tpu_demo.cli import fail
from tpu_demo.errors import FineTuneError
from tpu_demo.outputs import sample_path

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
CURVES = (("loss", "training loss"), ("eval_loss", "evaluation loss"), ("eval_cer", "held-out CER"),
          ("eval_wer", "held-out WER"), ("eval_speaker_similarity", "held-out speaker similarity"),
          ("eval_voice_stability", "voice stability over takes"))  # fmt: skip
HEALTH_COLUMNS = ("eos", "duration_s", "seconds_per_char", "silence_share", "rms", "longest_repeat_s", "cer", "wer",
                  "speaker_similarity")  # fmt: skip
WIDTH, HEIGHT, MARGIN = 560, 220, 40


class Run:
    """What a run's output folder holds: metrics.jsonl and summary.json."""

    def __init__(self, folder):
        self.folder = Path(folder)
        metrics_file = self.folder / "metrics.jsonl"
        if not metrics_file.is_file():
            raise FineTuneError(f"{self.folder}: no metrics.jsonl (not a run's output_dir, or it never logged)")
        self.records = []
        for line in metrics_file.read_text().splitlines():
            try:
                self.records.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line torn by an interruption
        if not any("step" in record for record in self.records):
            raise FineTuneError(f"{metrics_file}: no logged step (empty, or torn): nothing to report")
        summary = self.folder / "summary.json"
        self.summary = json.loads(summary.read_text()) if summary.is_file() else {}
        self.name = self.folder.resolve().name

    def series(self, key) -> list[tuple[int, float]]:
        return [(r["step"], r[key]) for r in self.records if isinstance(r.get(key), int | float)]

    def samples(self) -> dict[int, dict[int, dict]]:
        """Step: prompt number: that sample's health, from the `sample/prompt-N/...` metrics."""
        found = {}
        for record in self.records:
            for key, value in record.items():
                if key.startswith("sample/prompt-"):
                    prompt, _, figure = key.removeprefix("sample/prompt-").partition("/")
                    found.setdefault(record["step"], {}).setdefault(int(prompt), {})[figure] = value
        return found


def chart(title: str, runs: list[Run], key: str) -> str:
    """An SVG line chart of `key` over steps, one line per run; empty when no run logged it."""
    lines = [(run, run.series(key)) for run in runs]
    points = [point for _, series in lines for point in series]
    if not points:
        return ""
    steps, values = [s for s, _ in points], [v for _, v in points]
    low_step, high_step, low, high = min(steps), max(steps), min(values), max(values)

    def x(step):
        return MARGIN + (step - low_step) / ((high_step - low_step) or 1) * (WIDTH - 2 * MARGIN)

    def y(value):
        return HEIGHT - MARGIN - (value - low) / ((high - low) or 1) * (HEIGHT - 2 * MARGIN)

    parts = [
        f'<svg class="chart" data-metric="{key}" width="{WIDTH}" height="{HEIGHT}" role="img">',
        f'<text x="{MARGIN}" y="16">{html.escape(title)}</text>',
        f'<text x="4" y="{MARGIN}">{high:.3g}</text><text x="4" y="{HEIGHT - MARGIN}">{low:.3g}</text>',
        f'<text x="{MARGIN}" y="{HEIGHT - 8}">step {low_step}</text>'
        f'<text x="{WIDTH - MARGIN - 50}" y="{HEIGHT - 8}">step {high_step}</text>',
    ]
    for index, (run, series) in enumerate(lines):
        if series:
            coords = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in series)
            colour = COLOURS[index % len(COLOURS)]
            parts.append(
                f'<polyline data-run="{html.escape(run.name)}" data-points="{len(series)}" points="{coords}" '
                f'fill="none" stroke="{colour}" stroke-width="2"><title>{html.escape(run.name)}</title></polyline>'
            )
    return "".join(parts) + "</svg>"


def figure(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}"
    return html.escape(str(value))


def sample_table(run: Run, page_dir: Path) -> str:
    samples = run.samples()
    if not samples:
        return "<p>No samples in this run.</p>"
    head = "".join(
        f"<th>{name}</th>" for name in ("step", "prompt", "audio", *HEALTH_COLUMNS, "transcript", "problems")
    )
    rows = []
    for step in sorted(samples):
        for prompt in sorted(samples[step]):
            health = samples[step][prompt]
            wav = sample_path(run.folder, step, prompt)
            player = "(not kept)"
            if wav.is_file():
                player = f'<audio controls preload="none" src="{html.escape(os.path.relpath(wav, page_dir))}"></audio>'
            eos = health.get("eos")
            cells = [
                "yes" if eos == 1.0 else "no" if eos is not None else "",
                *(figure(health[name]) if name in health else "" for name in HEALTH_COLUMNS[1:]),
            ]
            problems = health.get("problems", "")
            rows.append(
                f'<tr class="{"broken" if problems else "healthy"}" data-step="{step}" data-prompt="{prompt}">'
                f"<td>{step}</td><td>{prompt}</td><td>{player}</td>"
                + "".join(f"<td>{cell}</td>" for cell in cells)
                + f"<td>{html.escape(str(health.get('transcript', '')))}</td><td>{html.escape(problems)}</td></tr>"
            )
    return f'<table class="samples"><tr>{head}</tr>{"".join(rows)}</table>'


def summary_table(runs: list[Run]) -> str:
    keys = ("steps", "interrupted", "stopped_early", "first_loss", "last_loss", "eval_loss", "eval_speaker_similarity",
            "eval_voice_stability", "best_step", "device",
            "mixed_precision", "train_samples_per_second", "transformers", "data")  # fmt: skip
    head = "<tr><th>run</th>" + "".join(f"<th>{key}</th>" for key in keys) + "</tr>"
    rows = [
        f'<tr data-run="{html.escape(run.name)}"><td>{html.escape(run.name)}</td>'
        + "".join(f"<td>{figure(run.summary[key]) if run.summary.get(key) is not None else ''}</td>" for key in keys)
        + "</tr>"
        for run in runs
    ]
    return f'<table class="summary">{head}{"".join(rows)}</table>'


def render(runs: list[Run], page: Path) -> str:
    legend = " ".join(
        f'<span style="color:{COLOURS[i % len(COLOURS)]}">&#9644; {html.escape(run.name)}</span>'
        for i, run in enumerate(runs)
    )
    charts = "".join(chart(title, runs, key) for key, title in CURVES)
    sections = "".join(
        f'<section data-run="{html.escape(run.name)}"><h2>{html.escape(run.name)}: samples</h2>'
        f"<p>{html.escape(str(run.folder))}</p>{sample_table(run, page.parent)}</section>"
        for run in runs
    )
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Dia fine-tune report</title><style>'
        "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}tr.broken{background:#fde0e0}"
        ".chart{border:1px solid #eee;margin:4px}text{font-size:11px}td{max-width:24em;overflow-wrap:anywhere}"
        "</style></head><body>"
        f"<h1>Dia fine-tune report</h1><p>{legend}</p>{summary_table(runs)}<div>{charts}</div>{sections}"
        "</body></html>"
    )


def write_report(folders, out=None) -> Path:
    runs = [Run(folder) for folder in folders]
    names = [run.name for run in runs]
    for run in runs:  # two folders of one name (a run and its copy): told apart by their parent
        if names.count(run.name) > 1:
            run.name = f"{run.folder.resolve().parent.name}/{run.name}"
    page = Path(out) if out else runs[0].folder / "report.html" if len(runs) == 1 else Path("report.html")
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(runs, page.resolve()), encoding="utf-8")
    return page


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="tpu_demo.report", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="output folders of runs (their metrics.jsonl and summary.json)")
    parser.add_argument("--out", help="the HTML file (default: RUN/report.html for one run, ./report.html for more)")
    args = parser.parse_args(argv)
    try:
        page = write_report(args.runs, args.out)
    except FineTuneError as error:
        fail(error)
    print(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
