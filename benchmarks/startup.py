"""Start-up time of the ``headwise`` command: ``--help`` and ``predict`` on small models.

    python benchmarks/startup.py                 # 9 runs each, writes startup:cpu in BENCHMARKS.md
    python benchmarks/startup.py --no-write      # print the section only
    python benchmarks/startup.py --runs 3 --no-write --model-dir /tmp/startup-models

Every command runs in a fresh process, ``--runs`` times after ``--warmup`` runs that are
not counted (they fill the page cache), one command after the other in turn (A B C A B C
...) so that a change in the machine's load hits all of them alike; the table gives the
median wall-clock and CPU (user + system) seconds of the whole process, with the fastest
and slowest run. The models are trained here by ``headwise train`` on a 60-row CSV written
here (a TF-IDF model and a tiny 2-layer Transformer), unless ``--model-dir`` holds them
from an earlier run.

Rows ``python -c pass`` (the interpreter), ``import torch`` and ``import load_classifier``
(``from headwise.intent.kinds import load_classifier`` and the single-label kinds'
classes, ``import headwise.intent.ensemble``: what loading any saved classifier imports)
are the floors the ``headwise`` rows are read against: ``predict``'s time minus the last
is what the command, the model file and the answer cost.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: the same benchmark before the lazy imports of headwise.intent / headwise.text (its
#: section of 2026-12-01 11:07 UTC, in git history), and before the light CLI
BEFORE = (
    "Before: every command took about 3.7 s, `--help` included (the issue's first-hour "
    "report). After the light CLI, 2026-12-01 11:07 UTC: `--help` 0.0575 s, `predict` 2.92 s "
    "(TFIDF) and 2.74 s (TINY-TRANSFORMER), of which 2.89 s was `import headwise.intent` "
    "(it imported scikit-learn, SciPy and every intent module eagerly). With the lazy "
    "imports the tiny Transformer's `predict` is the torch import, its model and its answer.")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

SECTION = "startup:cpu"
RESULTS = HERE / "results" / "startup_cpu.json"
#: what ``headwise --help`` must take (wall-clock seconds, median)
HELP_TARGET_S = 0.5
INTENTS = {
    "card_lost": ["i lost my card", "my card was stolen", "card missing since yesterday",
                  "someone took my card", "cannot find my card anywhere"],
    "transfer": ["send money to my friend", "transfer 50 pounds to john",
                 "make a transfer to my savings", "how do i send money abroad",
                 "wire money to another bank"],
    "balance": ["what is my balance", "how much money do i have", "show my account balance",
                "balance of my current account", "check how much is left"],
}
#: a 2-layer Transformer small enough that its forward pass is not what is measured
TINY = {"architecture": {"vocab_size": 200, "d_model": 32, "num_heads": 4, "num_layers": 2,
                         "max_length": 32},
        "train": {"epochs": 2}}
QUERY = "i lost my card"


def headwise_command() -> list[str]:
    """How a user runs ``headwise``: the console script beside this interpreter, else
    ``python -m headwise.cli``."""
    script = Path(sys.executable).with_name("headwise")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "headwise.cli"]


def write_data(path: Path) -> Path:
    """A 60-row CSV of three intents (``text,label``)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text", "label"])
        for label, texts in INTENTS.items():
            for text in texts:
                for tail in ("", " please", " now", " today"):
                    w.writerow([text + tail, label])
    return path


def build_models(folder: Path) -> dict[str, Path]:
    """``{"tfidf": DIR, "transformer": DIR}``, trained by ``headwise train`` in ``folder``
    (kept from an earlier run when there)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = write_data(folder / "train60.csv")
    config = folder / "tiny.json"
    config.write_text(json.dumps(TINY), encoding="utf-8")
    models = {"tfidf": folder / "tfidf", "transformer": folder / "tiny-transformer"}
    for kind, out in models.items():
        if (out / "intent.json").is_file() or (out / "tfidf.json").is_file():
            continue
        extra = ["--model", "tfidf"] if kind == "tfidf" else ["--model", "transformer",
                                                             "--config", str(config)]
        print(f"training the {kind} model in {out}", file=sys.stderr)
        subprocess.run([*headwise_command(), "train", "--data", str(data), "--out", str(out),
                        "--quiet", *extra], check=True, stdout=subprocess.DEVNULL)
    return models


def commands(models: dict[str, Path]) -> dict[str, list[str]]:
    """The measured command lines by the name their row has."""
    hw = headwise_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "headwise --help": [*hw, "--help"],
        "headwise --version": [*hw, "--version"],
        "headwise predict --help": [*hw, "predict", "--help"],
        "headwise serve --help": [*hw, "serve", "--help"],
        "import torch": [sys.executable, "-c", "import torch"],
        "import load_classifier": [sys.executable, "-c",
                                   "from headwise.intent.kinds import load_classifier; "
                                   "import headwise.intent.ensemble"],
        "headwise predict TFIDF": [*hw, "predict", str(models["tfidf"]), QUERY],
        "headwise predict TINY-TRANSFORMER": [*hw, "predict", str(models["transformer"]),
                                              QUERY],
    }


def run_once(cmd: list[str]) -> tuple[float, float]:
    """``(wall s, cpu s)`` of one run of ``cmd`` in a fresh process (its output thrown
    away; a failing command is an error)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(cmds: dict[str, list[str]], runs: int, warmup: int) -> dict[str, dict[str, Any]]:
    """Each command ``warmup`` times (not counted), then ``runs`` rounds of all of them in
    turn; per command, the :func:`_harness.summarize` of its wall and CPU seconds."""
    for _ in range(warmup):
        for cmd in cmds.values():
            run_once(cmd)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    for i in range(runs):
        for name, cmd in cmds.items():
            times[name].append(run_once(cmd))
        print(f"round {i + 1}/{runs} done", file=sys.stderr)
    return {name: {"wall_s": H.summarize([w for w, _ in t]),
                   "cpu_s": H.summarize([c for _, c in t])} for name, t in times.items()}


def section(data: dict[str, Any]) -> str:
    """The ``startup:cpu`` section of BENCHMARKS.md."""
    meta, rows = data["meta"], data["results"]
    table = H.markdown_table(
        ["command", "wall s (median)", "min - max", "CPU s (median)"],
        [[f"`{name}`", H.fmt(r["wall_s"]["median"]),
          f"{H.fmt(r['wall_s']['min'])} - {H.fmt(r['wall_s']['max'])}",
          H.fmt(r["cpu_s"]["median"])] for name, r in rows.items()])
    help_s = rows["headwise --help"]["wall_s"]["median"]
    floor = rows["import load_classifier"]["wall_s"]["median"]
    torch_s = rows["import torch"]["wall_s"]["median"]
    verdict = "meets" if help_s < HELP_TARGET_S else "misses"
    lines = [
        "## Start-up time of the `headwise` command (CPU)",
        "",
        H.provenance(meta),
        "",
        f"Each command in a fresh process, {meta['settings']['runs']} runs after "
        f"{meta['settings']['warmup']} not counted, in turn; wall-clock and CPU (user + system) "
        f"seconds of the whole process. The models: a TF-IDF model and a 2-layer, 32-wide "
        f"Transformer trained on a 60-row CSV; the query is one short text.",
        "",
        table,
        "",
        f"`headwise --help` takes {H.fmt(help_s)} s: it {verdict} the {HELP_TARGET_S} s target "
        f"(the listing imports no sub-command module). `predict` is "
        + ", ".join(f"{H.fmt(rows[n]['wall_s']['median'])} s ({n.split()[-1]})"
                    for n in ("headwise predict TFIDF", "headwise predict TINY-TRANSFORMER"))
        + f", of which {H.fmt(floor)} s is importing what loads a saved classifier "
        f"(`headwise.intent.kinds.load_classifier` and the kinds' classes: torch, "
        f"{H.fmt(torch_s)} s of it, and "
        f"no scikit-learn or matplotlib), the rest the command, the model file and the "
        f"answer.",
        "",
        BEFORE,
    ]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=9, help="counted runs per command (default 9)")
    p.add_argument("--warmup", type=int, default=1,
                   help="runs per command not counted (default 1)")
    p.add_argument("--model-dir", type=Path,
                   help="where the small models are trained, or kept from an earlier run "
                        "(default: a temporary folder, removed at the end)")
    p.add_argument("--md", type=Path, default=ROOT / "BENCHMARKS.md",
                   help="the summary markdown file; the section goes into its page "
                        "docs/benchmarks/serving.md beside it (default BENCHMARKS.md)")
    p.add_argument("--json", type=Path,
                   help=f"save the results here instead of benchmarks/results/{RESULTS.name} "
                        f"(with --no-write: not saved unless given)")
    p.add_argument("--no-write", action="store_true",
                   help="print the section, leave the markdown file alone")
    args = p.parse_args()
    if args.runs < 1 or args.warmup < 0:
        p.error("--runs must be at least 1 and --warmup at least 0")
    start = time.perf_counter()
    import torch  # for the record only: the default thread count the commands get

    meta = H.results_meta("cpu", torch.get_num_threads(),
                          {"runs": args.runs, "warmup": args.warmup})
    folder = args.model_dir or Path(tempfile.mkdtemp(prefix="headwise-startup-"))
    try:
        models = build_models(folder)
        results = measure(commands(models), args.runs, args.warmup)
    finally:
        if args.model_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
    meta["wall_min"] = (time.perf_counter() - start) / 60
    data = {"meta": meta, "results": results}
    H.finish_provenance(meta["provenance"])
    saved = args.json or (None if args.no_write else RESULTS)
    if saved:
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_text(json.dumps(data, indent=1), encoding="utf-8")
    for name, r in results.items():
        w = r["wall_s"]
        print(f"{name:36s} wall {w['median']:6.3f} s "
              f"[{w['min']:.3f}-{w['max']:.3f}]  cpu {r['cpu_s']['median']:6.3f} s",
              file=sys.stderr)
    H.publish(None, data, None if args.no_write else args.md, SECTION, lambda _: section(data))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
