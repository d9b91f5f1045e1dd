"""The data page: one HTML file beside metadata.csv (segment_report.html) to listen to what was kept and dropped.

Every kept clip with a player, its text, confidence, recording and start, the least confident first (an unchecked
transcript counts as none); every dropped stretch with its reason, its measure and a player over the recording itself
(a media fragment, `#t=start,end`: nothing is written for it); histograms of length, SNR, DNSMOS and pace of the kept
clips; seconds per speaker; each recording that could not be read, and why. Plain HTML and inline SVG, as the
training report (tpu_demo.report): it opens from disk, offline.
"""

import html
import os
from pathlib import Path

PAGE = "segment_report.html"
BINS, WIDTH, HEIGHT, MARGIN = 20, 300, 140, 24
HISTOGRAMS = (("seconds", "clip length (s)"), ("snr_db", "SNR (dB)"), ("ovrl", "DNSMOS overall (1-5)"),
              ("pace", "pace (s per character)"))  # fmt: skip


def measures(clip: dict) -> dict[str, float | None]:
    text = "".join(ch for ch in clip.get("text", "") if ch.isalnum())
    seconds = clip["end"] - clip["start"]
    return {"seconds": seconds, "snr_db": clip.get("snr_db"), "ovrl": (clip.get("dnsmos") or {}).get("ovrl"),
            "pace": seconds / len(text) if text else None}  # fmt: skip


def histogram(key: str, title: str, clips: list[dict]) -> str:
    """An SVG histogram of one measure over the kept clips; empty when none has it."""
    values = [value for clip in clips if (value := measures(clip)[key]) is not None]
    if not values:
        return ""
    low, high = min(values), max(values)
    width = (high - low) / BINS or 1.0
    counts = [0] * BINS
    for value in values:
        counts[min(int((value - low) / width), BINS - 1)] += 1
    bar, tallest = (WIDTH - 2 * MARGIN) / BINS, max(counts)
    heights = [count / tallest * (HEIGHT - 2 * MARGIN) for count in counts]
    bars = "".join(
        f'<rect x="{MARGIN + number * bar:.1f}" y="{HEIGHT - MARGIN - height:.1f}" width="{bar - 1:.1f}" '
        f'height="{height:.1f}" fill="#1f77b4"><title>{low + number * width:.3g}-{low + (number + 1) * width:.3g}: '
        f"{count}</title></rect>"
        for number, (count, height) in enumerate(zip(counts, heights, strict=True))
    )
    return (
        f'<svg class="histogram" data-measure="{key}" data-clips="{len(values)}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img"><text x="{MARGIN}" y="14">{html.escape(title)}</text>{bars}'
        f'<text x="{MARGIN}" y="{HEIGHT - 6}">{low:.3g}</text>'
        f'<text x="{WIDTH - MARGIN - 30}" y="{HEIGHT - 6}">{high:.3g}</text></svg>'
    )


def player(source: str) -> str:
    return f'<audio controls preload="none" src="{html.escape(source)}"></audio>'


def cell(value) -> str:
    if value is None:
        return "<td></td>"
    return f"<td>{value:.2f}</td>" if isinstance(value, float) else f"<td>{html.escape(str(value))}</td>"


def kept_table(kept: list[dict]) -> str:
    names = ("audio", "text", "confidence", "speaker", "recording", "from s", "s", "SNR", "DNSMOS")
    head = "".join(f"<th>{name}</th>" for name in names)
    rows = []
    for clip in sorted(kept, key=lambda clip: (clip.get("alignment") is not None, clip.get("alignment") or 0.0)):
        confidence = clip.get("alignment")
        heard = clip.get("asr_confidence")
        unchecked = "unchecked transcript" if heard is None else f"recogniser {heard:.2f}"
        shown = unchecked + (" (review.csv)" if clip.get("review") else "") if confidence is None else confidence
        rows.append(
            f'<tr class="kept" data-audio="{html.escape(clip["audio"])}"><td>{player(clip["audio"])}</td>'
            + "".join(
                cell(value)
                for value in (
                    clip.get("text"),
                    shown,
                    clip.get("speaker"),
                    clip["recording"],
                    clip["start"],
                    clip["end"] - clip["start"],
                    clip.get("snr_db"),
                    (clip.get("dnsmos") or {}).get("ovrl"),
                )
            )  # fmt: skip
            + "</tr>"
        )
    return f'<table class="kept"><tr>{head}</tr>{"".join(rows)}</table>'


def dropped_table(dropped: list[dict], sources: dict[str, Path], page_dir: Path) -> str:
    head = "".join(f"<th>{name}</th>" for name in ("audio", "reason", "measure", "recording", "from s", "to s"))
    rows = []
    for clip in sorted(dropped, key=lambda clip: (clip["dropped"], clip["recording"], clip["start"])):
        source = sources.get(clip["recording"])
        heard = (
            player(f"{os.path.relpath(source, page_dir)}#t={clip['start']:.2f},{clip['end']:.2f}") if source else ""
        )
        rows.append(
            f'<tr class="dropped" data-reason="{html.escape(clip["dropped"])}"><td>{heard}</td>'
            + "".join(
                cell(value)
                for value in (clip["dropped"], clip.get("detail"), clip["recording"], clip["start"], clip["end"])
            )  # fmt: skip
            + "</tr>"
        )
    return f'<table class="dropped"><tr>{head}</tr>{"".join(rows)}</table>'


def unread_table(skipped: dict[str, str]) -> str:
    """Each recording that could not be read, with why: it gave no clip, kept or dropped."""
    rows = "".join(
        f'<tr class="unread"><td>{html.escape(name)}</td><td>{html.escape(why)}</td></tr>'
        for name, why in sorted(skipped.items())
    )
    return f'<table class="unread"><tr><th>recording</th><th>why it was not read</th></tr>{rows}</table>'


def speakers_table(summary: dict) -> str:
    rows = "".join(
        f'<tr class="speaker"><td>{html.escape(name)}</td><td>{s["clips"]}</td><td>{s["seconds"]:.1f}</td></tr>'
        for name, s in summary["speakers"].items()
    )
    return f'<table class="speakers"><tr><th>speaker</th><th>clips</th><th>seconds</th></tr>{rows}</table>'


def write_page(summary: dict, out: Path, sources: dict[str, Path]) -> Path:
    """segment_report.html in `out`, from the report's `summary`; `sources`: each recording's file by its name."""
    clips = summary["clips"]
    kept = [clip for clip in clips if not clip.get("dropped") and clip.get("audio")]
    dropped = [clip for clip in clips if clip.get("dropped")]
    review = sum(1 for clip in kept if clip.get("review"))
    counts = (
        f"{len(kept)} clips kept ({sum(c['end'] - c['start'] for c in kept):.1f} s), {review} of them to review "
        f"(review.csv); {len(dropped)} dropped ({sum(c['end'] - c['start'] for c in dropped):.1f} s)"
    )
    skipped = summary.get("skipped") or {}
    if skipped:
        counts += f"; {len(skipped)} recording{'s' if len(skipped) > 1 else ''} not read (below)"
    charts = "".join(histogram(key, title, kept) for key, title in HISTOGRAMS)
    page = (
        '<!doctype html><html><head><meta charset="utf-8"><title>Dia dataset</title><style>'
        "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}tr.dropped{background:#fde0e0}"
        ".histogram{border:1px solid #eee;margin:4px}text{font-size:11px}td{max-width:30em;overflow-wrap:anywhere}"
        "</style></head><body>"
        f"<h1>Dia dataset: {html.escape(str(out))}</h1><p>{html.escape(counts)}</p>{speakers_table(summary)}"
        f"<div>{charts}</div><h2>kept, the least confident first</h2>{kept_table(kept)}"
        f"<h2>dropped</h2>{dropped_table(dropped, sources, out)}"
        + (f"<h2>not read</h2>{unread_table(skipped)}" if skipped else "")
        + "</body></html>"
    )
    (out / PAGE).write_text(page, encoding="utf-8")
    return out / PAGE
