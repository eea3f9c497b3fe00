"""The doctor's report: ``issues.csv`` (one row per finding, for tools and spreadsheets),
``summary.json`` and ``index.html`` (offline: no external URL, no script), with the
template intents, what gave the out-of-fold probabilities and the time of each step."""

from __future__ import annotations

import csv
import html
import json
from pathlib import Path

from headwise.intent.doctor.findings import ISSUES, SET_JOIN, Examination
from headwise.intent.doctor.templates import TEMPLATE_OVERLAP

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
    "looks_out_of_scope": "the out-of-fold model is unsure of every intent (score: its top "
                          "probability, below the bound above): a question none of the "
                          "intents may cover; look at it, the doctor never drops it",
    "duplicate": "the same text again with the same label",
    "near_duplicate": "a nearly identical text with the same label",
    "few_rows": "an intent with too few rows to learn or to evaluate",
}


def summary(exam: Examination) -> dict:
    """``summary.json``'s content."""
    return {"rows": exam.rows, "multi_label": exam.multi_label, "intents": exam.intents,
            "issues": exam.counts,
            "confusions": [{"label": c.label, "predicted": c.predicted, "count": c.count,
                            "share": c.share} for c in exam.confusions],
            "templates": [{"intent": t.intent, "rows": t.rows, "copies": t.copies,
                           "share": t.share, "skeleton": t.skeleton,
                           "example_row": t.example_row} for t in exam.templates],
            "probabilities": exam.probabilities, "similarity": exam.similarity,
            "oos_bound": exam.oos_bound, "steps": exam.steps,
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
    templates = "".join(
        f"<tr><td>{esc(t.intent)}</td><td>{t.copies} of {t.rows} ({100 * t.share:.0f} %)</td>"
        f"<td>{esc(t.skeleton)}</td><td>{t.example_row}</td></tr>" for t in exam.templates)
    steps = "".join(f"<tr><td>{esc(k)}</td><td>{v:.2f} s</td></tr>"
                    for k, v in exam.steps.items())
    bound = ("" if exam.oos_bound is None else
             f" A row looks out of scope below a top probability of {exam.oos_bound:.3f}.")
    conf = "".join(f"<tr><td>{esc(c.label)}</td><td>{esc(c.predicted)}</td><td>{c.count}</td>"
                   f"<td>{100 * c.share:.1f} %</td></tr>" for c in exam.confusions)
    intents = "".join(f"<tr><td>{esc(k)}</td><td>{n}</td></tr>" for k, n in exam.intents.items())
    counts = ", ".join(f"{k} {n}" for k, n in exam.counts.items() if n) or "none"
    kind = (f" with several intents each (a row's intents joined by {SET_JOIN})"
            if exam.multi_label else "")
    multi = (" (multi-label: an intent of the row left out, another put in)"
             if exam.multi_label else "")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>headwise doctor: {esc(data)}</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse;
margin:.5em 0 1.5em}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:left}}
th{{background:#f3f3f3}}</style></head><body>
<h1>What is wrong with {esc(data)}</h1>
<p>{exam.rows} rows{kind}, {len(exam.intents)} intents; issues: {esc(counts)}.
Every row issue is also in <code>issues.csv</code>.</p>
<p>Out-of-fold probabilities: {esc(exam.probabilities or "none (too few rows)")}.{bound}
Near duplicates: cosine similarity of {esc(exam.similarity)}.</p>
{''.join(rows)}
<h2>Intents made of one template ({len(exam.templates)})</h2>
<p>Most of the intent's rows differ from another of its rows in one stretch only
(digits masked; the common beginning and end cover at least
{100 * TEMPLATE_OVERLAP:.0f} % of the text): the data teaches the template, not the ways
people ask.</p>
<table><tr><th>intent</th><th>template copies</th><th>most common skeleton</th>
<th>example row</th></tr>{templates}</table>
<h2>Intents the data makes confusable</h2>
<p>Out-of-fold predictions: rows of an intent given another{multi}.</p>
<table><tr><th>label</th><th>predicted as</th><th>rows</th><th>share of the label</th></tr>
{conf}</table>
<h2>Rows per intent</h2><table><tr><th>intent</th><th>rows</th></tr>{intents}</table>
<h2>Time of each step</h2><table><tr><th>step</th><th>time</th></tr>{steps}
<tr><td>all</td><td>{exam.seconds:.2f} s</td></tr></table>
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
