"""BENCHMARKS.md and docs/benchmarks/*.md are what ``benchmarks/render.py`` renders from the
stored records (no measurement, no torch work), and the provenance machinery of
``benchmarks/_harness.py`` says what it should."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness as H  # noqa: E402
import render  # noqa: E402


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One render of every section from the committed records (BENCHMARKS.md, the pages,
    the README with its quotes), shared by the tests that read it: a render reads every
    record file, and the tests below need it once, not once each. Read-only."""
    out = tmp_path_factory.mktemp("rendered")
    render.render(out / "BENCHMARKS.md")
    return out


def _copy_of(rendered: Path, tmp_path: Path) -> Path:
    """A writable copy of the shared render, for a test that writes into it."""
    import shutil

    return Path(shutil.copytree(rendered, tmp_path / "rendered"))


def test_committed_pages_equal_their_render(rendered: Path) -> None:
    assert render.differing(rendered, ROOT) == [], (
        "BENCHMARKS.md, README.md or a page under docs/benchmarks/ differs from what its "
        "records render: run `python benchmarks/render.py` (or re-run the benchmark)")


def test_render_is_deterministic(rendered: Path, tmp_path: Path) -> None:
    render.render(tmp_path / "BENCHMARKS.md")
    assert render.differing(rendered, tmp_path) == []


def test_every_section_has_a_page_and_a_source() -> None:
    assert set(render.SOURCES) == set(H.PAGES)
    assert set(H.PAGES.values()) <= set(H.AREAS)
    pages = H.read_pages(ROOT / "BENCHMARKS.md")
    assert list(pages) == list(H.PAGES)  # every section once, on its page, in PAGES order
    for body in pages.values():
        assert body.split("\n")[0].startswith("#")
        assert "*Measured on: " in body


def test_every_section_renders_from_its_records(rendered: Path) -> None:
    """No section is hand-written text: each renders from stored records (the shared
    render wrote every one: a section without a record stops the rendering), and a
    section without any stops the rendering, naming the command that writes one."""
    pages = H.read_pages(rendered / "BENCHMARKS.md")
    assert list(pages) == list(H.PAGES) and all(body.strip() for body in pages.values())
    empty = ROOT / "benchmarks" / "no-such-results"
    with pytest.raises(SystemExit, match="attention:cpu: no record; run `python benchmarks/"):
        render.bodies(empty)


def test_write_section_puts_a_section_on_its_page_and_rebuilds_the_summary(
        tmp_path: Path) -> None:
    md = tmp_path / "BENCHMARKS.md"
    H.write_section(md, "decode:cpu", "## Decoding\n\n| target | verdict | measured |\n"
                    "| --- | --- | --- |\n| fast | PASS | yes |")
    H.write_section(md, "blend", "*Measured on: x* - y.\n\nblend text")
    H.write_section(md, "decode:cpu", "## Decoding again\n\n*Measured on: somewhere* - z.")
    page = (tmp_path / "docs" / "benchmarks" / "attention.md").read_text()
    assert page.count("<!-- decode:cpu:begin -->") == 1 and "Decoding again" in page
    assert "blend text" in (tmp_path / "docs" / "benchmarks" / "intent.md").read_text()
    summary = md.read_text()
    assert "[Decoding again](docs/benchmarks/attention.md#decoding-again) | somewhere |" \
        in summary
    other = tmp_path / "other.md"  # a section of no area stays in the file given
    H.write_section(other, "scratch", "hello")
    assert "<!-- scratch:begin -->\nhello\n<!-- scratch:end -->" in other.read_text()


def _prov(commit: str, cpu: str = "CPU A", date: str = "2026-12-01 10:00 UTC") -> dict:
    return {"commit": commit, "dirty": False, "cpu": cpu, "cpu_flags": ["avx2"], "cores": 2,
            "threads": 2, "versions": {"python": "3.11"}, "loadavg_before": 0.1,
            "loadavg_after": 0.2, "date": date}


def test_unmixed_keeps_each_row_to_one_commit_and_machine() -> None:
    old = {"config": "a", "seed": 0, "provenance": None}
    a1 = {"config": "a", "seed": 1, "provenance": _prov("1" * 40, date="2026-12-02 10:00 UTC")}
    b0 = {"config": "b", "seed": 0, "provenance": _prov("2" * 40)}
    b1 = {"config": "b", "seed": 1, "provenance": _prov("2" * 40, cpu="CPU B",
                                                         date="2026-11-30 10:00 UTC")}
    kept, out = H.unmixed([old, a1, b0, b1], ("config",))
    assert kept == [a1, b0] and out == [old, b1]
    kept, out = H.unmixed([old, a1, b0, b1], ("config", "seed"))  # one record per row
    assert out == []


def test_machine_line_names_each_provenance_and_not_recorded() -> None:
    assert H.machine_line([{}]).startswith("*Measured on: not recorded* - provenance not "
                                           "recorded")
    line = H.machine_line([{"provenance": _prov("a" * 40)}, {"provenance": None}], left_out=1)
    assert "CPU A (avx2), 2 logical CPUs, 2 torch threads; commit aaaaaaaaaa" in line
    assert "(1 of 2 records)" in line and "provenance not recorded (1 of 2 records)" in line
    assert "1 older records of another commit or machine are left out" in line
    assert H.commits_of(f"## x\n\n{line}") == ["aaaaaaaaaa"]


def test_collect_provenance_reads_this_machine_and_checkout() -> None:
    p = H.finish_provenance(H.collect_provenance(3))
    assert p["threads"] == 3 and p["cores"] >= 1 and "python" in p["versions"]
    assert set(p["cpu_flags"]) <= set(H.CPU_FLAGS)
    info = Path("/proc/cpuinfo")
    if info.exists():  # the same facts read independently
        lines = info.read_text().splitlines()
        model = next((ln.split(":", 1)[1].strip() for ln in lines
                      if ln.startswith("model name")), None)
        flags = next((set(ln.split(":", 1)[1].split()) for ln in lines
                      if ln.startswith("flags")), set())
        assert model is None or p["cpu"] == model
        assert p["cpu_flags"] == [f for f in H.CPU_FLAGS if f in flags]
    assert p["loadavg_before"] >= 0 and p["loadavg_after"] >= 0
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True)
    if head.returncode == 0:
        assert p["commit"] == head.stdout.strip() and isinstance(p["dirty"], bool)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True, env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                                          "GIT_COMMITTER_NAME": "t",
                                          "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(cwd)}
                          ).stdout.strip()


def test_stale_files_reports_changed_modules_since_a_commit(tmp_path: Path) -> None:
    try:
        _git(tmp_path, "init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git unavailable")
    (tmp_path / "kernel.py").write_text("a = 1\n")
    (tmp_path / "other.py").write_text("b = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "one")
    first = _git(tmp_path, "rev-parse", "HEAD")
    assert H.stale_files(first, ["kernel.py"], cwd=tmp_path) == []
    (tmp_path / "other.py").write_text("b = 2\n")
    _git(tmp_path, "commit", "-qam", "two")
    assert H.stale_files(first, ["kernel.py"], cwd=tmp_path) == []
    (tmp_path / "kernel.py").write_text("a = 2\n")
    _git(tmp_path, "commit", "-qam", "three")
    assert H.stale_files(first, ["kernel.py"], cwd=tmp_path) == ["kernel.py"]
    assert H.stale_files("0" * 40, ["kernel.py"], cwd=tmp_path) is None  # not in this clone
    assert H.stale_files(None, ["kernel.py"], cwd=tmp_path) is None


def test_merge_refused_unless_same_commit_and_machine(tmp_path: Path) -> None:
    import json

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"meta": {}, "records": []}))
    assert "predates provenance" in H.merge_refusal(path)
    here = H.collect_provenance()
    path.write_text(json.dumps({"meta": {"provenance": here}, "records": []}))
    assert H.merge_refusal(path) is None
    path.write_text(json.dumps({"meta": {"provenance": {**here, "cpu": "another CPU"}},
                                "records": []}))
    assert "another CPU" in H.merge_refusal(path)


@pytest.mark.parametrize("script", ["oos", "demo_ood", "demo_heldout", "demo_transformer",
                                    "distill"])
def test_a_script_writes_its_section_as_the_render_does(rendered: Path, tmp_path: Path,
                                                       script: str) -> None:
    """What ``SCRIPT.py --render --md`` writes (the path of a real run's end) is what
    ``benchmarks/render.py`` renders: the pages and the summary stay the same."""
    import importlib

    md = _copy_of(rendered, tmp_path) / "BENCHMARKS.md"
    pages = sorted((md.parent / "docs").rglob("*.md"))
    assert len(pages) == len(set(H.PAGES.values()))  # every page, not the summary alone
    before = {p: p.read_text() for p in [md, *pages]}
    importlib.import_module(script).main(["--render", "--md", str(md)])
    assert {p: p.read_text() for p in before} == before


def test_what_benchmarks_write_does_not_make_a_record_dirty(tmp_path: Path,
                                                           monkeypatch) -> None:
    try:
        _git(tmp_path, "init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git unavailable")
    for name in ("code.py", "BENCHMARKS.md", "benchmarks/results/runs.jsonl",
                 "docs/benchmarks/intent.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("one\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "one")
    real = H._git
    monkeypatch.setattr(H, "_git", lambda *args, cwd=tmp_path: real(*args, cwd=tmp_path))
    assert H.collect_provenance()["dirty"] is False
    for name in ("BENCHMARKS.md", "benchmarks/results/runs.jsonl", "docs/benchmarks/intent.md"):
        (tmp_path / name).write_text("two\n")  # a run appends its record, writes its pages
    assert H.collect_provenance()["dirty"] is False
    (tmp_path / "code.py").write_text("two\n")  # the measured code changed
    assert H.collect_provenance()["dirty"] is True


def test_demo_ood_keeps_runs_with_out_of_scope_training_rows_apart(tmp_path: Path) -> None:
    """Records of ``--oos-train N --outlier-exposure W`` never replace or join the rows of
    the corpus without training rows: that part renders as without them, and the new
    configurations come after it, side by side, the choice read on validation."""
    import copy
    import json

    import demo_ood

    base = [r for r in demo_ood.done_runs(ROOT / "benchmarks" / "results" /
                                          "demo_ood.jsonl").values()
            if demo_ood.config_of(r) == (0, 0.0)]  # the corpus without training rows
    assert base
    alone = demo_ood.render(base)
    extra = []
    for weight in (0.0, 0.5):
        for r in base:
            r = copy.deepcopy(r)
            r.update(oos_train=150, outlier_exposure=weight)
            for m in r["models"].values():
                m["valid_read"] = copy.deepcopy(m["detectors"])
                if weight:  # exposure: every detector's test and validation reads move up
                    for d in (*m["detectors"].values(), *m["valid_read"].values()):
                        d["oos_recall"] = min(1.0, d["oos_recall"] + 0.1)
                        d["mean"] = (d["in_scope_accuracy"] + d["oos_recall"]) / 2
            extra.append(r)
    path = tmp_path / "runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in base + extra))
    runs = demo_ood.done_runs(path)
    assert len(runs) == 3 * len(base)  # keyed by seed and configuration
    text = demo_ood.render(list(runs.values()))
    assert text.startswith(alone + "\n\n### Out-of-scope training rows")
    new = text[len(alone):]
    rows = [line for line in new.splitlines() if line.startswith("| transformer |")]
    assert [row.split(" | ")[1:3] for row in rows] == [["0", "0"], ["150", "0"],
                                                        ["150", "0.5"]]
    assert [row.split(" | ")[7] for row in rows] == ["", "", "yes"]  # chosen on validation
    assert "exposure 0.5 minus 0 on the test mean +" in new
    with pytest.raises(SystemExit):
        demo_ood.parse_args(["--outlier-exposure", "0.5"])


def test_a_per_run_results_file_keeps_every_run_and_names_each_machine(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    first = {"n": 1, "provenance": None}
    second = {"n": 2, "provenance": {"cpu": "AMD EPYC", "cpu_flags": ["avx2"],
                                     "commit": "0123456789abcdef", "dirty": False,
                                     "cores": 2, "date": "2026-12-03 14:14 UTC"}}
    assert H.add_run(path, first) == [first]
    assert H.add_run(path, second) == [first, second]
    assert [json.loads(ln) for ln in path.read_text().splitlines()] == [first, second]
    assert H.run_machine(first) == "a machine not recorded"
    assert H.run_machine(second) == "AMD EPYC (avx2), commit 0123456789"
    body = H.per_run_section(["## Runs", "", "intro"], [first, second],
                             lambda r: [f"run {r['n']}: {H.run_machine(r)}"])
    assert body.index("intro") < body.index("run 1: a machine") < body.index("run 2: AMD")
    assert body.split("\n")[2].startswith("*Measured on: ")


@pytest.mark.parametrize("script", ["intent", "oos", "distill", "compound"])
def test_a_quick_smoke_run_never_writes_the_real_records(script: str) -> None:
    """--quick with the default results file goes to a temporary file and prints its
    section; a results file the user names is kept (their choice)."""
    import argparse
    import importlib
    import tempfile

    mod = importlib.import_module(script)
    args = argparse.Namespace(quick=True, results=mod.RESULTS, no_write=False)
    H.divert_smoke_runs(args, mod.RESULTS)
    assert args.results.parent == Path(tempfile.gettempdir()) and args.no_write
    assert args.results != mod.RESULTS
    mine = Path(tempfile.gettempdir()) / "mine.jsonl"
    args = argparse.Namespace(quick=True, results=mine, no_write=False)
    H.divert_smoke_runs(args, mod.RESULTS)
    assert args.results == mine and not args.no_write
    args = argparse.Namespace(quick=False, results=mod.RESULTS, no_write=False)
    H.divert_smoke_runs(args, mod.RESULTS)
    assert args.results == mod.RESULTS and not args.no_write


def test_a_headline_tallies_the_current_verdicts_not_an_earlier_grids():
    import _harness as H

    body = "\n".join([
        "## Section", "", "| target | verdict | measured |", "| --- | --- | --- |",
        "| new target | PASS | x |", "| other | within noise | y |", "",
        f"### Grid 1 {H.EARLIER_MARK}grid; base: old)", "", "| target | verdict | measured |",
        "| --- | --- | --- |", "| old target | FAIL | z |", "",
        "#### its detail", "| old detail | FAIL | w |", "",
        "### Notes", "| later target | FAIL | v |"])
    assert H.headline(body) == "1 PASS, 1 within noise, 1 FAIL; failed: later target"
    assert "old" not in "\n".join(H.current_lines(body))


def test_the_readme_quotes_its_table_from_the_section(rendered: Path) -> None:
    """The README's demo table is the demo:heldout section's, cut to the README's columns:
    rendered, never typed, so it cannot go stale."""
    body = ("## The demo\n\n*Measured on: x* - y.\n\nCommand: `c` (seeds [0, 1, 2]).\n\n"
            "| target | verdict |\n| --- | --- |\n| t | PASS |\n\n"
            "| model | a % | b | c % |\n| --- | ---: | ---: | ---: |\n"
            "| m1 | 1.0 [0.5, 1.5] | x | 3 |\n| m2 | 2.0 | y | 4 |\n\nafter")
    assert render.quote_table(body, ("model", "c %", "a %")) == (
        "| model | c % | a % |\n| --- | ---: | ---: |\n| m1 | 3 | 1.0 [0.5, 1.5] |\n"
        "| m2 | 4 | 2.0 |")
    with pytest.raises(ValueError, match="no table"):
        render.quote_table(body, ("model", "z"))
    # only the rows whose cell in the keep column is the value
    assert render.quote_table(body, ("model", "a %"), keep=("b", "y")) == (
        "| model | a % |\n| --- | ---: |\n| m2 | 2.0 |")
    only = {"demo:heldout": render.README_QUOTES["demo:heldout"]}
    key, columns = only["demo:heldout"].section, only["demo:heldout"].columns
    readme = ("intro\n<!-- quote demo:heldout:begin -->\nold text\n"
              "<!-- quote demo:heldout:end -->\nrest\n")
    sections = {key: body.replace("| model | a % | b | c % |", "| " + " | ".join(columns) + " |")
                .replace("| --- | ---: | ---: | ---: |", "| --- |" + " ---: |" * 6)
                .replace("| m1 | 1.0 [0.5, 1.5] | x | 3 |", "| m1 |" + " 1 |" * 6)
                .replace("| m2 | 2.0 | y | 4 |", "| m2 |" + " 2 |" * 6)}
    out = render.quote_readme(readme, sections, only)
    assert "old text" not in out and out.startswith("intro\n") and out.endswith("\nrest\n")
    assert "Over three seeds it scores" in out and "(docs/benchmarks/intent.md#the-demo)" in out
    assert "| m1 | 1 | 1 | 1 | 1 | 1 | 1 |" in out
    with pytest.raises(SystemExit, match="no <!-- quote demo:heldout:begin -->"):
        render.quote_readme("no markers", sections, only)
    with pytest.raises(SystemExit, match="no <!-- quote compound:comparison:begin -->"):
        render.quote_readme(readme, {**sections, "compound:cpu": body})
    # the committed README holds every block, rendered from the records (render.render
    # writes the committed README with its quotes rendered again)
    committed = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in render.README_QUOTES:
        assert f"<!-- quote {name}:begin -->" in committed
    assert (rendered / "README.md").read_text(encoding="utf-8") == committed


def test_cpu_finetune_keeps_a_cpu_with_and_without_bf16_apart_and_judges_auto() -> None:
    """The same CPU name with and without native BF16 are two machines of the fine-tuning
    section (a run on one must not replace the other's records); ``auto`` passes where it
    kept fp32 or took a faster bf16, and fails where it took a bf16 that is slower."""
    import _verdicts as V
    import cpu_finetune as C

    zen4 = {"cpu": "AMD EPYC", "cpu_flags": ["avx2", "avx512f", "avx512_bf16"]}
    zen3 = {"cpu": "AMD EPYC", "cpu_flags": ["avx2"]}
    assert C.machine_words(zen4) == "AMD EPYC (avx512_bf16)"
    assert C.machine_words(zen3) == "AMD EPYC (no BF16 instructions)"
    assert C.machine_of({"provenance": None}) == "not recorded"
    slower, faster = V.Interval(0.06, 0.05, 0.07), V.Interval(1.5, 1.3, 1.7)
    assert C._auto_verdict("fp32", slower) == "PASS"
    assert C._auto_verdict("bf16", slower) == "FAIL"
    assert C._auto_verdict("bf16", faster) == "PASS"
    assert C._auto_verdict("bf16", V.Interval(1.0, 0.9, 1.1)) == "within noise"
    assert C._auto({"auto": "fp32 (auto: fp32, the CPU has no native BF16)"}) == "fp32"


def test_cpu_finetune_judges_bf16_over_fp32_untrimmed_and_trimmed_on_a_bf16_cpu_only() -> None:
    """Both bf16 / fp32 targets (the untrimmed model, like for like with transformers, and
    the trimmed one `headwise train` fine-tunes) are judged from their own per-round ratios
    on a CPU with native BF16, and left out (the note says why) on one without."""
    import cpu_finetune as C

    rounds = {"headwise fp32": [40.0, 42.0, 41.0], "transformers fp32": [40.0, 41.0, 42.0],
              "headwise bf16": [56.0, 59.0, 57.0], "transformers bf16": [60.0, 61.0, 59.0],
              "headwise fp32, trimmed vocabulary": [60.0, 62.0, 61.0],
              "headwise bf16, trimmed vocabulary": [110.0, 115.0, 112.0]}
    rows = [ln for ln in C._targets({"texts_per_s": rounds, "auto": "bf16 (probe)"})
            [0].splitlines() if ln.startswith("| headwise bf16 / fp32")]
    assert len(rows) == 2
    untrimmed, trimmed = rows
    assert "trimmed" not in untrimmed and "| FAIL |" in untrimmed  # 1.39 [1.36, 1.42]
    assert "what `headwise train` runs" in trimmed and "| PASS |" in trimmed  # 1.84
    emulated = "\n".join(C._targets({"texts_per_s": rounds, "native_bf16": False,
                                     "auto": "fp32"}))
    assert "| headwise bf16 / fp32" not in emulated
    assert "left open on this machine" in emulated


def test_cpu_finetune_dropout_part_renders_each_side_and_their_ratio() -> None:
    """The dropout part's table: one row per operation, precision and length with both
    sides' medians and the per-round ratio headwise / torch (a geometric-mean interval;
    a single round says so instead of inventing one)."""
    import cpu_finetune as C

    record = {"ms": {"hidden-state dropout | fp32 | 15": {"torch": [1.2, 1.1, 1.3],
                                                           "headwise": [0.4, 0.4, 0.5]},
                     "softmax of (batch, heads, L, L) scores | fp32 | 8":
                         {"torch": [0.3], "headwise": [0.2]}},
              "batch": 32, "d_model": 384, "heads": 12, "dropout": 0.1,
              "attention_dropout": 0.1, "threads": 2, "cpu_capability": "AVX512",
              "rounds": 3, "reps": 20, "batches_shorter_than_16": 0.5, "dataset": "cic",
              "provenance": {"cpu": "AMD EPYC", "cpu_flags": ["avx512_bf16"]}}
    text = "\n".join(C._dropout_lines(record))
    assert "50 % of the length-bucketed training batches of cic" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| hidden-state dropout"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["hidden-state dropout", "fp32", "15", "1.200", "0.400"]
    assert cells[5].startswith("0.36 [")  # the geometric mean of 1/3, 4/11, 5/13
    assert "fewer than two rounds" in text


def test_cpu_finetune_attention_part_judges_the_dispatchers_choice() -> None:
    """The attention part's table: per case both sides' medians, the ratio math / SDPA, the
    backend the dispatcher took and whether the measurement backs it (the faster one only
    when the interval clears 1 on its side); a record from before the field was kept says
    'not recorded' and judges nothing."""
    import cpu_finetune as C

    faster, slower, tied = [1.0, 1.1, 0.9], [2.0, 2.2, 1.8], [1.0, 1.3, 0.8]
    record = {"ms": {"32x12x32 | fp32 | 15": {"sdpa": slower, "math": faster},
                     "32x12x32 | fp32 | 128": {"sdpa": faster, "math": slower},
                     "4x8x16 | fp32 | 8": {"sdpa": faster, "math": slower},
                     "8x8x16 | bf16 | 64": {"sdpa": [1.0, 1.0, 1.0], "math": tied}},
              "dispatched": {"32x12x32 | fp32 | 15": "math", "32x12x32 | fp32 | 128": "sdpa",
                             "4x8x16 | fp32 | 8": "math", "8x8x16 | bf16 | 64": "math"},
              "threads": 2, "cpu_capability": "AVX512", "rounds": 3,
              "provenance": {"cpu": "AMD EPYC", "cpu_flags": ["avx512_bf16"]}}

    def verdicts(rec: dict) -> list[list[str]]:
        lines = "\n".join(C._attention_lines(rec)).splitlines()
        rows = [ln for ln in lines if ln.startswith("| ") and "x" in ln.split("|")[1]]
        return [[c.strip() for c in r.strip("|").split("|")] for r in rows]

    got = verdicts(record)
    assert [r[6:] for r in got] == [["math", "the faster one"], ["sdpa", "the faster one"],
                                   ["math", "the slower one"], ["math", "within noise"]]
    assert got[0][3:5] == ["2.000", "1.000"] and got[0][5].startswith("0.50 [")
    old = {k: v for k, v in record.items() if k != "dispatched"}
    assert [r[6:] for r in verdicts(old)][:3] == [["not recorded", "-"]] * 3


def test_cpu_finetune_attention_inputs() -> None:
    """The self-attention inputs both timed parts use: q, k, v requiring gradients, the
    output gradient, and a key-padding pattern whose first text is full length and whose
    others keep at least half the keys, with its smallest broadcastable mask."""
    import cpu_finetune as C
    import torch

    gen = torch.Generator().manual_seed(0)
    q, k, v, g, pattern, small = C._attention_inputs((5, 3, 9, 4), torch.bfloat16, gen)
    assert all(t.shape == (5, 3, 9, 4) and t.requires_grad and t.dtype == torch.bfloat16
               for t in (q, k, v))
    assert g.shape == q.shape and not g.requires_grad
    assert small.shape == (5, 1, 1, 9) and small.dtype == torch.bool
    kept = small.sum(-1).flatten().tolist()
    assert kept[0] == 9 and all(4 <= n <= 9 for n in kept)
    assert torch.equal(pattern.to_broadcast(9, 9), small)


def test_cpu_finetune_profile_judges_useful_gflops_against_half_the_matmul_rate() -> None:
    """An fp32 step's useful GFLOP/s over the run's fp32 matmul rate, per vocabulary, judged
    on the interval over its timed repeats; a record without the repeats gets no row."""
    import cpu_finetune as C

    record = {"matmul_gflops": {"fp32": 200.0}, "useful_flops": 60e9,
              "precisions": {"fp32": {"step_seconds_all": [0.70, 0.71, 0.69]}},
              "precisions_trimmed": {"fp32": {"step_seconds_all": [0.50, 0.51, 0.50]}}}
    table = "\n".join(C._profile_targets(record))
    untrimmed = next(ln for ln in table.splitlines() if "untrimmed vocabulary" in ln)
    trimmed = next(ln for ln in table.splitlines() if "what `headwise train` runs" in ln)
    assert "| FAIL |" in untrimmed and "0.43 [" in untrimmed  # 60 / 0.7 / 200
    assert "| PASS |" in trimmed and "0.60 [" in trimmed
    assert C._profile_targets({"matmul_gflops": {"fp32": 200.0}, "useful_flops": 1.0,
                               "precisions": {"fp32": {"step_seconds": 0.7}}}) == []
    paired = {"matmul_gflops": {"fp32": 200.0}, "useful_flops": 60e9,
              "precisions": {"fp32": {"step_seconds_all": [0.5, 0.5],
                                      "matmul_fp32_gflops_each": [100.0, 300.0]}}}
    row = C._profile_targets(paired)[0].splitlines()[-1]
    assert "0.80 [" in row and "right before it" in row  # (1.2 + 0.4) / 2: per repeat


def test_distillation_judges_no_earlier_teacher_whose_records_predate_provenance() -> None:
    """Of two teachers of one dataset, the earlier one measured before records kept
    provenance shows its rows without a verdict; the later one is judged (target and the
    distilled-against-alone control)."""
    import distill

    def rec(sha: str, student: str, data: str, seed: int, f1: float, prov: bool) -> dict:
        r = {"status": "ok", "dataset": "demo", "teacher": f"/models/{sha}",
             "teacher_sha256": sha, "student": student, "data": data, "seed": seed,
             "accuracy": f1, "macro_f1": f1, "parameters": 1e6, "unlabelled": 0,
             "labelled": 100, "train_seconds": 10.0, "date": "2026-12-01 10:00 UTC",
             "command": "python benchmarks/distill.py",
             "latency": {"p50_ms": 10.0 if student == "teacher" else 1.0 + seed / 10,
                         "throughput_per_s": 100.0}}
        if prov:
            r["provenance"] = {"commit": "a" * 40, "cpu": "AMD EPYC", "threads": 2}
            r["teacher_latency"] = {"p50_ms": 10.0 + seed / 10, "throughput_per_s": 100.0}
        return r

    runs = []
    for sha, prov in (("old", False), ("new", True)):
        runs.append(rec(sha, "teacher", "all", 0, 0.90, prov))
        for seed in range(3):
            runs.append(rec(sha, "bilstm", "all", seed, 0.89 + seed / 1000, prov))
            runs.append(rec(sha, "bilstm", "alone", seed, 0.85 + seed / 1000, prov))
    text = distill.render(runs)
    old = text[text.index("### demo, teacher `old`"):text.index("### demo, teacher `new`")]
    new = text[text.index("### demo, teacher `new`"):]
    assert "No verdict: these records predate provenance" in old
    assert "| target |" not in old and "distilled - alone" not in old
    assert "| bilstm |" not in old and "`bilstm` | all | 0,1,2" in old  # its rows stay
    assert "No verdict" not in new and "| target |" in new
    assert "BETTER" in new  # 0.89 against 0.85 on every seed


def test_cpu_finetune_explain_part_runs_both_sides_of_the_rule(monkeypatch) -> None:
    """The explain part on a tiny from-scratch classifier (the rule's size threshold off):
    the side with the rule sends gradient attention to the math kernel, the other only to
    SDPA, both explain the same texts to the same attributions, and the shipped thresholds
    are back in place afterwards; its line judges the per-round ratio."""
    import argparse
    import functools
    import types

    import cpu_finetune as C
    import torch

    import headwise.attention.kernels as kernels
    import headwise.attention.mha as mha
    import headwise.inspect.attribution as attribution
    from headwise.demo.corpus import generate_demo_corpus
    from headwise.intent.training.builders import build_intent_model
    from headwise.intent.training.recipe import IntentRecipe
    from headwise.text.char_level import train_char_tokenizer

    examples = generate_demo_corpus(seed=0, per_intent=3, oos=2)["train"]
    tok = train_char_tokenizer([e.text for e in examples])
    labels = sorted({e.label for e in examples if e.label != "oos"})
    recipe = IntentRecipe.from_dict({"architecture": {
        "d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32, "dropout": 0.0,
        "attention_dropout": 0.0, "max_length": 48}})
    torch.manual_seed(0)
    model = build_intent_model(recipe, tok, labels)
    setup = types.SimpleNamespace(headwise_model=lambda: model.train(), tokenizer=tok,
                                  intents=labels, texts=[e.text for e in examples])
    monkeypatch.setattr(kernels, "CPU_GRAD_MATH_MIN_SCORES",
                        {torch.float32: 0, torch.bfloat16: 0})
    shipped, select = kernels.CPU_GRAD_MATH_MAX_KEYS, mha.select_backend
    # an untrained network turns sharply along the path: few evaluations keep this quick
    monkeypatch.setattr(attribution, "explain", functools.partial(attribution.explain,
                                                                  max_steps=16))
    args = argparse.Namespace(explain_texts=3, rounds=2, max_length=48)
    rec = C.explain_costs(setup, args)
    taken = rec["backends_with_gradients"]
    assert set(taken["rule"]) == {"math"} and set(taken["sdpa"]) == {"sdpa"}
    assert taken["rule"]["math"] == taken["sdpa"]["sdpa"] > 0  # the same calls
    assert kernels.CPU_GRAD_MATH_MAX_KEYS is shipped and mha.select_backend is select
    assert rec["texts"] == 3 and len(rec["ms"]["rule"]) == len(rec["ms"]["sdpa"]) == 2
    assert rec["max_attribution_difference"] < 1e-4
    assert all(n > 0 for n in rec["gradient_evaluations"])
    rec.update(ms={"rule": [60.0, 66.0, 54.0], "sdpa": [100.0, 110.0, 90.0]},
               dataset="demo", threads=2, rounds=3,
               provenance={"cpu": "AMD EPYC", "cpu_flags": ["avx512_bf16"]})
    text = "\n".join(C._explain_lines(rec))
    assert "| 60 | 100 | 0.60 [" in text and "faster with the rule" in text
    n = taken["rule"]["math"]
    assert f"With the rule, {n} of {n} attention calls with gradients took the math" in text
    rec["ms"] = {"rule": [100.0, 130.0, 80.0], "sdpa": [100.0, 100.0, 100.0]}
    assert "within noise" in "\n".join(C._explain_lines(rec))


def test_rerun_of_a_soup_keeps_members_measured_at_this_commit() -> None:
    """--rerun of a soup (intent.py, compound.py) measures the soup again, and its members
    only where their records are of another commit or machine; without --rerun only what
    has no record."""
    import intent

    here = {"commit": "b" * 40, "dirty": False, "cpu": "AMD EPYC", "cpu_flags": ["avx2"]}
    old = {**here, "commit": "a" * 40}
    d, member, soup = "banking77", "minilm-lpft-2e5", "minilm-lpft-2e5-soup3"
    done = {(d, member, 0): {"provenance": here}, (d, member, 1): {"provenance": old},
            (d, member, 2): {}, (d, soup, 0): {"provenance": here}}
    named = [(d, soup, 0)]
    assert H.runs_to_measure(named, done, True, here, intent.CONFIGS) == [
        (d, member, 1), (d, member, 2), (d, soup, 0)]
    assert H.runs_to_measure(named, done, False, here, intent.CONFIGS) == []
    assert H.runs_to_measure([(d, member, 0)], done, True, here,
                              intent.CONFIGS) == [(d, member, 0)]
