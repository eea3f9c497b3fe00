"""Re-render ``BENCHMARKS.md`` and every page ``docs/benchmarks/<area>.md`` from the stored
records in ``benchmarks/results/`` alone: no measurement, no model, no network, nothing
outside the repository.

    python benchmarks/render.py                 # rewrite BENCHMARKS.md, the pages and the
                                                # README's quotes
    python benchmarks/render.py --out DIR       # write them under DIR instead (DIR/BENCHMARKS.md)
    python benchmarks/render.py --check         # exit 1 when the committed files differ
    python benchmarks/render.py --stale         # the sections whose modules changed since

:data:`SOURCES` says, for every section of :data:`_harness.PAGES`, how its body is rendered
from its records (the same function the benchmark script writes it with), which modules it
benchmarks (for ``--stale``) and the command that re-runs it. Every section renders from
records; one without any stops the rendering, naming that command. The README quotes one
table of a section (:data:`README_QUOTES`), between ``<!-- quote NAME:begin -->`` and
``<!-- quote NAME:end -->``, rendered with the rest, so its numbers are the records' too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

RESULTS = HERE / "results"


@dataclass(frozen=True)
class Source:
    """How one section is rendered: ``render(results folder, pages folder)`` gives its body
    (None: no record yet), ``modules`` are what it benchmarks
    (paths from the repository root) and ``rerun`` the command that measures it again."""

    render: Callable[[Path, Path], str | None]
    modules: tuple[str, ...]
    rerun: str


def _json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _attention(res: Path, pages: Path, device: str = "cpu") -> str | None:
    import _attention_report as report

    data = _json(res / f"attention_{device}.json")
    return data and H.with_machine_line(
        report.section(data, report.plots(data, res, draw=False), pages), [data["meta"]])


def _long(res: Path, pages: Path) -> str | None:
    import _long_report as report

    data = _json(res / "long_attention_cpu.json")
    return data and H.with_machine_line(
        report.section(data, report.plots(data, res, draw=False), pages), [data["meta"]])


def _decode(res: Path, pages: Path) -> str | None:
    import decode

    data = _json(res / "decode_cpu.json")
    return data and H.with_machine_line(decode.section(data, res / "decode_cpu.png", pages),
                                        [data["meta"]])


def _sparse_dispatch(res: Path, pages: Path) -> str | None:
    import sparse_dispatch

    runs = _jsonl(res / "sparse_dispatch_cpu.jsonl")
    return sparse_dispatch.section(runs) if runs else None


def _train(res: Path, pages: Path) -> str | None:
    import _report_train as report

    data = _json(res / "train_throughput_cpu.json")
    return data and H.with_machine_line(report.section(data), [data["meta"]])


def _pruning(res: Path, pages: Path) -> str | None:
    import pruning

    data = _json(res / "pruning_cpu.json")
    return data and pruning.section(data, res / "pruning_cpu.png", pages)


def _intent(res: Path, pages: Path) -> str | None:
    import _intent_report as report
    import intent

    runs = list(intent.done_runs(res / "intent_runs.jsonl").values())
    return H.render_records(lambda rs: report.render(rs, res, pages, draw=False), runs,
                            intent.ROW) if runs else None


def _footprint(res: Path, pages: Path) -> str | None:
    import pretrained_footprint as fp

    data = _json(res / "pretrained_footprint.json")
    return data and fp.section(data)


def _e5(res: Path, pages: Path) -> str | None:
    import e5_fidelity

    data = _json(res / "e5_fidelity_cpu.json")
    return data and H.with_machine_line(e5_fidelity.section(data), [data["meta"]])


def _heldout(res: Path, pages: Path) -> str | None:
    import demo_heldout

    done = demo_heldout.ok_runs(res / "demo_heldout.jsonl")
    return H.render_records(demo_heldout.render, done, ()) if done else None


def _demo_transformer(res: Path, pages: Path) -> str | None:
    import demo_transformer

    runs = list(H.done_runs(res / demo_transformer.RESULTS.name, demo_transformer.KEY).values())
    return H.render_records(demo_transformer.render, runs, ("grid", "config"))


def _transformer_default(res: Path, pages: Path) -> str | None:
    import transformer_default as td

    runs = list(H.done_runs(res / td.RESULTS.name, td.KEY).values())
    return H.render_records(td.render, runs, ("corpus", "config")) if runs else None


def _ood(res: Path, pages: Path) -> str | None:
    import demo_ood

    runs = list(demo_ood.done_runs(res / "demo_ood.jsonl").values())
    return H.render_records(demo_ood.render, runs, demo_ood.CONFIG) if runs else None


def _demo_time(res: Path, pages: Path) -> str | None:
    import demo_time

    runs = _jsonl(res / "demo_time.jsonl")
    return demo_time.section(runs) if runs else None


def _bf16_accuracy(res: Path, pages: Path) -> str | None:
    import bf16_accuracy

    return bf16_accuracy.section(res / "bf16_accuracy_runs.jsonl")


def _cic_train(res: Path, pages: Path) -> str | None:
    import cic_train_time

    return cic_train_time.section(_jsonl(res / "cic_train_time.jsonl"))


def _oos(res: Path, pages: Path) -> str | None:
    import oos

    runs = list(oos.done_runs(res / "oos_runs.jsonl").values())
    return H.render_records(oos.render, runs, oos.ROW) if runs else None


def _blend(res: Path, pages: Path) -> str | None:
    import blend

    runs = blend.records(res / "blend.jsonl")
    return H.render_records(blend.render, runs, blend.ROW) if runs else None


def _distill(res: Path, pages: Path) -> str | None:
    import distill

    runs = list(distill.load_runs(res / "distill_runs.jsonl").values())
    return H.render_records(distill.render, runs, distill.ROW) if runs else None


def _doctor(res: Path, pages: Path) -> str | None:
    import doctor

    return doctor.section(res / doctor.RESULTS.name) if (res / doctor.RESULTS.name).is_file() \
        else None


def _cpu_finetune(res: Path, pages: Path) -> str | None:
    import cpu_finetune

    path = res / cpu_finetune.RESULTS.name
    return cpu_finetune.section(path) if path.is_file() else None


def _playground(res: Path, pages: Path) -> str | None:
    import playground

    data = _json(res / "playground_cpu.json")
    if data is None:
        return H.with_machine_line("## The playground page: explaining one message (CPU)"
                                   "\n\nNothing measured yet.", [])
    return H.with_machine_line(playground.section(data, pages), [data["meta"]])


def _long_text(res: Path, pages: Path) -> str | None:
    import long_text

    runs = list(H.done_runs(res / long_text.RESULTS.name, ("seed",)).values())
    return H.render_records(long_text.render, runs, ())  # "nothing measured" without runs


def _train_estimate(res: Path, pages: Path) -> str | None:
    import train_estimate

    runs = list(H.done_runs(res / train_estimate.RESULTS.name, ("kind", "seed")).values())
    return H.render_records(train_estimate.render, runs, ())


def _warm_start(res: Path, pages: Path) -> str | None:
    import warm_start

    return warm_start.section(res / warm_start.RESULTS.name)


def _explain(res: Path, pages: Path) -> str | None:
    import explain_faithfulness as ef

    return ef.section(res / ef.RESULTS.name)  # "not measured" until its first run


def _compound(res: Path, pages: Path) -> str | None:
    import _compound_report as report
    import compound

    runs = list(compound.done_runs(res / "compound_runs.jsonl").values())
    return H.render_records(lambda rs: report.render(rs, res, pages, draw=False), runs,
                            compound.ROW) if runs else None


def _serve(res: Path, pages: Path) -> str | None:
    import _serve_report as report

    data = _json(res / "serve_cpu.json")
    return data and report.full_section(data)


def _serve_access(res: Path, pages: Path) -> str | None:
    import _serve_report as report

    data = _json(res / "serve_access_cpu.json")
    return data and report.access_section(data)


def _startup(res: Path, pages: Path) -> str | None:
    import startup

    data = _json(res / "startup_cpu.json")
    return data and H.with_machine_line(startup.section(data), [data["meta"]])


def _batch(res: Path, pages: Path) -> str | None:
    import batch_predict

    data = _json(res / "batch_predict_cpu.json")
    return data and H.with_machine_line(batch_predict.section(data), [data["meta"]])


def _ray(res: Path, pages: Path) -> str | None:
    import ray_serve

    data = _json(res / "ray_serve_cpu.json")
    return data and H.with_machine_line(ray_serve.section(data), [data["meta"]])


def _one_path(res: Path, pages: Path) -> str | None:
    import one_path

    return one_path.section(res / one_path.RESULTS.name)


def _inspect(res: Path, pages: Path) -> str | None:
    import inspect_demo

    data = _json(res / "inspect_demo_cpu.json")
    return data and inspect_demo.section(data)


def _translate(res: Path, pages: Path) -> str | None:
    import _translate_report as report

    data = _json(res / "translate_cpu.json")
    return data and H.with_machine_line(report.section(data, res / "translate_cpu.png", pages),
                                        [data["meta"]])


def _int8(res: Path, pages: Path) -> str | None:
    import int8_choice

    runs = _jsonl(res / "int8_choice.jsonl")
    return int8_choice.section(runs) if runs else None


def _walkthrough(res: Path, pages: Path) -> str | None:
    import walkthrough

    data = _json(res / "walkthrough.json")
    return data and walkthrough.section(data)


def _hardening(res: Path, pages: Path) -> str | None:
    import hardening

    runs = _jsonl(res / "hardening.jsonl")
    return hardening.section(runs) if runs else None


_ATTN = ("headwise/attention",)
_INTENT = ("headwise/intent", "headwise/nn")
_SERVE = ("headwise/serve", "headwise/intent/inference", "headwise/intent/classifier.py")
SOURCES: dict[str, Source] = {
    "attention:cpu": Source(_attention, _ATTN, "python benchmarks/attention.py"),
    "attention:cuda": Source(partial(_attention, device="cuda"), _ATTN,
                             "python benchmarks/attention.py --device cuda"),
    "long_attention:cpu": Source(_long, _ATTN, "python benchmarks/long_attention.py"),
    "decode:cpu": Source(_decode, (*_ATTN, "headwise/nn"), "python benchmarks/decode.py"),
    "sparse_dispatch:cpu": Source(_sparse_dispatch, _ATTN,
                                  "python benchmarks/sparse_dispatch.py"),
    "train_throughput:cpu": Source(_train, ("headwise/nn", "headwise/attention", "headwise/train"),
                                   "python benchmarks/train_throughput.py"),
    "pruning:cpu": Source(_pruning, ("headwise/inspect", "headwise/nn"),
                          "python benchmarks/pruning.py"),
    "hardening:hypothesis": Source(_hardening, ("headwise/attention", "headwise/nn"),
                                   "python benchmarks/hardening.py"),
    "intent:cpu": Source(_intent, _INTENT, "python benchmarks/intent.py"),
    "intent:pretrained-footprint": Source(
        _footprint, (*_INTENT, *_SERVE, "headwise/onnx", "headwise/models"),
        "python benchmarks/pretrained_footprint.py --model-dir MODEL"),
    "e5_fidelity:cpu": Source(_e5, ("headwise/models",),
                              "python benchmarks/e5_fidelity.py --write"),
    "demo:heldout": Source(_heldout, (*_INTENT, "headwise/demo"),
                           "python benchmarks/demo_heldout.py --rerun"),
    "demo:transformer": Source(_demo_transformer, (*_INTENT, "headwise/demo", "headwise/models"),
                               "python benchmarks/demo_transformer.py --seeds 0,1,2"),
    "transformer_default:cpu": Source(
        _transformer_default, (*_INTENT, "headwise/models"),
        "python benchmarks/transformer_default.py --seeds 0,1,2"),
    "demo:ood": Source(_ood, (*_INTENT, "headwise/demo"), "python benchmarks/demo_ood.py --rerun"),
    "demo:time": Source(_demo_time, ("headwise",), "python benchmarks/demo_time.py --runs 3"),
    "oos:cpu": Source(_oos, _INTENT, "python benchmarks/oos.py"),
    "blend": Source(_blend, _INTENT, "python benchmarks/blend.py"),
    "distill:cpu": Source(_distill, _INTENT, "python benchmarks/distill.py --teacher MODEL"),
    "doctor:cpu": Source(_doctor, ("headwise/intent/doctor",
                                   "headwise/intent/training/cleaning.py"),
                         "python benchmarks/doctor.py --seeds 0,1,2"),
    "cpu_finetune:cpu": Source(_cpu_finetune, ("headwise/train", "headwise/nn",
                                                 "headwise/attention",
                                                 "headwise/intent/training"),
                               "python benchmarks/cpu_finetune.py"),
    "bf16_accuracy:cpu": Source(_bf16_accuracy, ("headwise/train", "headwise/intent/training",
                                                 "headwise/models"),
                                "python benchmarks/bf16_accuracy.py --seeds 0,1,2"),
    "cic_train:cpu": Source(_cic_train, ("headwise/intent", "headwise/train", "headwise/models",
                                         "headwise/commands/train.py"),
                            "python benchmarks/cic_train_time.py --seeds 0,1,2"),
    "train_estimate:cpu": Source(_train_estimate, ("headwise/train/estimate.py",
                                                   "headwise/train/trainer.py"),
                                 "python benchmarks/train_estimate.py --seeds 0,1"),
    "playground:cpu": Source(_playground, (*_SERVE, "headwise/inspect"),
                             "python benchmarks/playground.py"),
    "demo:long_text": Source(_long_text, (*_INTENT, "headwise/demo"),
                             "python benchmarks/long_text.py --rerun"),
    "warm-start:cpu": Source(_warm_start, ("headwise/intent/training/warm_start.py",
                                           "headwise/intent/training/pipeline.py",
                                           "headwise/intent/training/compound.py"),
                             "python benchmarks/warm_start.py --seeds 0,1,2"),
    "compound:cpu": Source(_compound, ("headwise/intent", "headwise/slots", "headwise/nn",
                                       "headwise/models"),
                           "python benchmarks/compound.py"),
    "serve:cpu": Source(_serve, _SERVE, "python benchmarks/serve.py"),
    "startup:cpu": Source(_startup, ("headwise/cli.py", "headwise/commands", "headwise/_lazy.py",
                                     "headwise/__init__.py"),
                          "python benchmarks/startup.py"),
    "serve-access:cpu": Source(_serve_access, _SERVE,
                               "python benchmarks/serve.py --parts access"),
    "batch_predict:cpu": Source(_batch, _SERVE, "python benchmarks/batch_predict.py"),
    "ray-serve:cpu": Source(_ray, _SERVE, "python benchmarks/ray_serve.py"),
    "int8:choice": Source(_int8, ("headwise/onnx", "headwise/serve"),
                          "python benchmarks/int8_choice.py --model-dir MODEL"),
    "one_path:cpu": Source(_one_path, ("headwise/intent/inference", "headwise/intent/batch",
                                       "headwise/serve", "headwise/commands/predict.py"),
                           "python benchmarks/one_path.py"),
    "walkthrough": Source(_walkthrough, ("README.md", "docs/walkthrough.md", "headwise/cli.py",
                                         "headwise/commands"),
                          "python benchmarks/walkthrough.py"),
    "inspect_demo:cpu": Source(_inspect, ("headwise/inspect", "headwise/demo"),
                               "python benchmarks/inspect_demo.py"),
    "explain_faithfulness:cpu": Source(
        _explain, ("headwise/inspect/attribution.py", "headwise/inspect/rollout.py",
                   "headwise/demo"),
        "python benchmarks/explain_faithfulness.py --seeds 0,1,2 --texts 200"),
    "translate:cpu": Source(_translate, ("headwise/nn", "headwise/attention"),
                            "python benchmarks/translate.py"),
}
"""Section name -> its :class:`Source`; the same names as :data:`_harness.PAGES`."""


@dataclass(frozen=True)
class Quote:
    """A README block rendered from a section: the first Markdown table of ``section`` that
    has every one of ``columns``, cut to them in that order, after ``lead`` (a format
    string of ``seeds``, the section's seeds in words, ``key``, ``title`` and ``link``);
    ``keep`` ``(column, value)``: only the rows whose cell in that column is ``value``."""

    section: str
    columns: tuple[str, ...]
    lead: str
    keep: tuple[str, str] | None = None


#: README block name -> its :class:`Quote`
README_QUOTES: dict[str, Quote] = {
    "demo:heldout": Quote(
        "demo:heldout", ("model", "accuracy %", "macro-F1 %", "accuracy with threshold %",
                         "in-scope rejected %", "out-of-scope recall %", "train s"),
        "Over {seeds} it scores (mean [95 % interval]; quoted from BENCHMARKS `{key}` by "
        "`benchmarks/render.py`,\n[{title}]({link}),\nwhich also has the slice table):"),
    "compound:comparison": Quote(
        "compound:cpu", ("family", "configuration", "exact match % [95 %]",
                         "intent micro-F1 %", "slot span F1 %"),
        "On the corpus with compound questions, each family's configuration chosen on its "
        "validation rows (exact match: the whole intent set right, the case study's "
        "accuracy;\nquoted from BENCHMARKS `{key}`, [{title}]({link}), with every "
        "configuration run and the targets):",
        keep=("chosen on validation", "**yes**")),
}


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def quote_table(body: str, columns: tuple[str, ...],
                keep: tuple[str, str] | None = None) -> str:
    """The first Markdown table of ``body`` whose header has every one of ``columns`` (and
    ``keep``'s column), cut to those columns in that order; with ``keep`` ``(column,
    value)``, only its rows whose cell in that column is ``value``.

    Raises:
        ValueError: no table of ``body`` has them all.
    """
    lines = body.split("\n")
    for i, line in enumerate(lines):
        if not line.startswith("|") or i + 1 >= len(lines) or \
                not lines[i + 1].startswith("| ---"):
            continue
        header = _cells(line)
        if not set(columns) | ({keep[0]} if keep else set()) <= set(header):
            continue
        idx = [header.index(c) for c in columns]
        rows = []
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            cells = _cells(row)
            if keep is None or cells[header.index(keep[0])] == keep[1]:
                rows.append("| " + " | ".join(cells[j] for j in idx) + " |")
        align = ["---"] + ["---:"] * (len(columns) - 1)
        return "\n".join(["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |",
                          *rows])
    raise ValueError(f"no table with the columns {columns}")


def _seeds_of(body: str) -> str:
    m = re.search(r"seeds \[([0-9, ]+)\]", body)
    n = len(m.group(1).split(",")) if m else 0
    return {1: "one seed", 2: "two seeds", 3: "three seeds", 4: "four seeds",
            5: "five seeds"}.get(n, f"{n} seeds")


def quote_readme(text: str, sections: dict[str, str],
                 quotes: dict[str, Quote] | None = None) -> str:
    """``text`` (the README) with every block of ``quotes`` (default
    :data:`README_QUOTES`) rendered from ``sections`` (section name -> body): its sentence
    (naming the section) and the table.

    Raises:
        SystemExit: a quote's markers are missing from ``text``.
    """
    for name, quote in (README_QUOTES if quotes is None else quotes).items():
        begin, end = f"<!-- quote {name}:begin -->", f"<!-- quote {name}:end -->"
        if begin not in text or end not in text:
            raise SystemExit(f"README.md: no {begin} ... {end} block")
        key = quote.section
        body = sections[key]
        title = body.split("\n")[0].lstrip("# ").strip()
        link = f"docs/benchmarks/{H.PAGES[key]}.md#{H.anchor(title)}"
        block = (quote.lead.format(seeds=_seeds_of(body), key=key, title=title, link=link) +
                 f"\n\n{quote_table(body, quote.columns, quote.keep)}")
        head, _, rest = text.partition(begin)
        _, _, tail = rest.partition(end)
        text = f"{head}{begin}\n{block}\n{end}{tail}"
    return text


def bodies(results: Path = RESULTS, pages: Path = ROOT / H.PAGES_DIR) -> dict[str, str]:
    """Every section's body, rendered from the records under ``results`` with image links
    relative to ``pages``.

    Raises:
        SystemExit: a section without a record (the command that writes one named).
    """
    out = {}
    for key in H.PAGES:
        body = SOURCES[key].render(results, pages)
        if body is None:
            raise SystemExit(f"{key}: no record; run `{SOURCES[key].rerun}`")
        out[key] = body.strip()
    return out


def render(md: Path, results: Path = RESULTS) -> None:
    """Write the summary ``md``, its pages (``docs/benchmarks/`` beside it) and the README
    beside it (the committed README with its quotes rendered) from the records under
    ``results``."""
    sections = bodies(results, H.page_dir(ROOT / "BENCHMARKS.md"))
    H.write_pages(md, sections)
    readme = quote_readme((ROOT / "README.md").read_text(encoding="utf-8"), sections)
    (md.parent / "README.md").write_text(readme, encoding="utf-8")


def stale(results: Path = RESULTS) -> list[str]:
    """One line per section: the commit of its records and the benchmarked modules changed
    since (``git diff``), or why that cannot be told."""
    lines = []
    for key, text in bodies(results).items():
        commits = sorted(set(H.commits_of(text)))
        if not commits:
            lines.append(f"{key}: commit not recorded, cannot tell")
        for c in commits:
            changed = H.stale_files(c, SOURCES[key].modules)
            what = ("cannot tell (no git or the commit is not in this clone)" if changed is None
                    else f"STALE: {', '.join(changed)} changed since" if changed
                    else "current")
            lines.append(f"{key} (commit {c}): {what}")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None,
                   help="write BENCHMARKS.md and docs/benchmarks/ under this folder instead")
    p.add_argument("--check", action="store_true",
                   help="render into a temporary folder; exit 1 when a committed file differs")
    p.add_argument("--stale", action="store_true",
                   help="list the sections whose benchmarked modules changed since their "
                        "records' commit")
    args = p.parse_args(argv)
    if args.stale:
        print("\n".join(stale()))
        return 0
    if args.check:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            render(Path(tmp) / "BENCHMARKS.md")
            diff = differing(Path(tmp), ROOT)
        for d in diff:
            print(f"differs from its records: {d}", file=sys.stderr)
        return 1 if diff else 0
    out = args.out or ROOT
    render(out / "BENCHMARKS.md")
    print(f"wrote {out / 'BENCHMARKS.md'} and {out / H.PAGES_DIR}/", file=sys.stderr)
    return 0


def differing(rendered: Path, committed: Path) -> list[str]:
    """The files of a render under ``rendered`` (BENCHMARKS.md and the pages) that differ
    from, or are missing under, ``committed``; also pages under ``committed`` the render
    has not."""
    names = ["BENCHMARKS.md", "README.md", *sorted(f"{H.PAGES_DIR.as_posix()}/{p.name}"
                                      for p in (rendered / H.PAGES_DIR).glob("*.md"))]
    extra = sorted(f"{H.PAGES_DIR.as_posix()}/{p.name}"
                   for p in (committed / H.PAGES_DIR).glob("*.md")
                   if not (rendered / H.PAGES_DIR / p.name).exists())
    return [n for n in names if not (committed / n).is_file()
            or (committed / n).read_text(encoding="utf-8")
            != (rendered / n).read_text(encoding="utf-8")] + extra


if __name__ == "__main__":
    sys.exit(main())
