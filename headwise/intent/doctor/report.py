"""The doctor's report: ``issues.csv`` (one row per finding, for tools and spreadsheets),
``summary.json`` and ``index.html`` (offline: no external URL, no script)."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from headwise.intent.doctor.findings import ISSUES, Examination

__all__ = ["CSV_COLUMNS", "EXPLAINED", "write_report"]

#: the columns of ``issues.csv``
CSV_COLUMNS = ("row", "text", "label", "issue", "suggested_label", "other_row", "score",
               "file")
#: what each issue means, as the report says it
EXPLAINED = {
    "conflicting_duplicate": "the same text again with another label",
    "conflicting_near_duplicate": "a nearly identical text with another label",
    "label_issue": "confident learning (cleanlab) on out-of-fold probabilities says the "
                   "label is probably wrong",
    "leakage": "a validation row that is also a training row",
    "duplicate": "the same text again with the same label",
    "near_duplicate": "a nearly identical text with the same label",
    "few_rows": "an intent with too few rows to learn or to evaluate",
}


def summary(exam: Examination) -> dict:
    """``summary.json``'s content."""
    return {"rows": exam.rows, "intents": exam.intents, "issues": exam.counts,
            "confusions": [{"label": c.label, "predicted": c.predicted, "count": c.count,
                            "share": c.share} for c in exam.confusions],
            "seconds": round(exam.seconds, 2)}


def _html(exam: Examination, data: str) -> str:
    esc = html.escape
    rows = []
    for kind in ISSUES:
        found = [f for f in exam.findings if f.issue == kind]
        if not found:
            continue
        rows.append(f"<h2>{esc(kind)} ({len(found)})</h2><p>{esc(EXPLAINED[kind])}</p>")
        body = "".join(
            f"<tr><td>{f.file}:{f.row}</td><td>{esc(f.text)}</td><td>{esc(f.label)}</td>"
            f"<td>{esc(f.suggested_label)}</td><td>{f.other_row or ''}</td>"
            f"<td>{f.score:.3f}</td></tr>" for f in found[:500])
        more = f"<p>and {len(found) - 500} more in issues.csv</p>" if len(found) > 500 else ""
        rows.append("<table><tr><th>row</th><th>text</th><th>label</th><th>suggested</th>"
                    f"<th>other row</th><th>score</th></tr>{body}</table>{more}")
    conf = "".join(f"<tr><td>{esc(c.label)}</td><td>{esc(c.predicted)}</td><td>{c.count}</td>"
                   f"<td>{100 * c.share:.1f} %</td></tr>" for c in exam.confusions)
    intents = "".join(f"<tr><td>{esc(k)}</td><td>{n}</td></tr>" for k, n in exam.intents.items())
    counts = ", ".join(f"{k} {n}" for k, n in exam.counts.items() if n) or "none"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>headwise doctor: {esc(data)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse;
margin:.5em 0 1.5em}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
th{{background:#f3f3f3}}</style></head><body>
<h1>What is wrong with {esc(data)}</h1>
<p>{exam.rows} rows, {len(exam.intents)} intents; issues: {esc(counts)}.
Every row issue is also in <code>issues.csv</code>.</p>
{''.join(rows)}
<h2>Intents the data makes confusable</h2>
<p>Out-of-fold predictions of the TF-IDF model: rows of an intent given another.</p>
<table><tr><th>label</th><th>predicted as</th><th>rows</th><th>share of the label</th></tr>
{conf}</table>
<h2>Rows per intent</h2><table><tr><th>intent</th><th>rows</th></tr>{intents}</table>
</body></html>
"""


def write_report(exam: Examination, out: str | Path, data: str) -> Path:
    """Write ``issues.csv``, ``summary.json`` and ``index.html`` into ``out`` (created);
    returns ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "issues.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for x in exam.findings:
            w.writerow([x.row, x.text, x.label, x.issue, x.suggested_label, x.other_row,
                        x.score, x.file])
    (out / "summary.json").write_text(json.dumps(summary(exam), ensure_ascii=False, indent=1)
                                      + "\n", encoding="utf-8")
    (out / "index.html").write_text(_html(exam, data), encoding="utf-8")
    return out
