"""How long ``headwise train`` takes on DataCLUE CIC with its defaults, as a team runs it:
``headwise train --data train.json --valid dev.json --format clue --out DIR --seed S`` in a
fresh process (the console script), no ``--model``: the default model for Chinese text
(multilingual-e5-small with its family's measured defaults, LP-FT), ``precision`` auto.

Per run: the wall-clock and CPU seconds of the training command, its peak RSS, what it
trained (the model, the epochs, the precision ``auto`` chose) and, outside the timed part,
the saved model's accuracy and macro-F1 on ``test_public.json`` by ``headwise eval`` (the
test split is read only to score). Target (issue 38): the default fine-tuning end to end at
most 30 minutes on 2 cores, judged on the mean wall time's 95 % t-interval over the runs
(PASS when it lies wholly within, FAIL when wholly above, within noise otherwise). Run it
alone on the machine.

    python benchmarks/cic_train_time.py --seeds 0,1,2      # writes cic_train:cpu
    python benchmarks/cic_train_time.py --seeds 0 --no-write --results /tmp/cic.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402
from startup import headwise_command  # noqa: E402

SECTION = "cic_train:cpu"
RESULTS = HERE / "results" / "cic_train_time.jsonl"
#: issue 38's target for the default fine-tuning on CIC, in seconds
TARGET_S = 30 * 60.0
HEADING = "## How long `headwise train` takes on DataCLUE CIC with its defaults (CPU)"


def run_once(data_dir: Path, seed: int) -> dict[str, Any]:
    """One default training run on CIC and its score on the test split."""
    from headwise.intent.kinds import kind_of

    cic = data_dir / "dataclue_cic"
    work = Path(tempfile.mkdtemp(prefix="headwise-cic-train-"))
    try:
        timed = H.timed_process(headwise_command() + [
            "train", "--data", str(cic / "train.json"), "--valid", str(cic / "dev.json"),
            "--format", "clue", "--out", str(work / "model"), "--seed", str(seed), "--quiet"])
        rec = {"wall_s": round(timed["wall_s"], 1), "cpu_s": round(timed["cpu_s"], 1),
               "peak_rss_mib": round(timed["peak_rss_mib"])}
        kind = kind_of(work / "model")  # a network, or blended with TF-IDF: an ensemble
        meta = json.loads((work / "model" / kind.marker).read_text(encoding="utf-8"))
        info = meta.get("info") or {}
        recipe = info.get("recipe") or {}
        blend = info.get("blend") or {}
        subprocess.run(headwise_command() + [
            "eval", str(work / "model"), "--data", str(cic / "test_public.json"), "--format",
            "clue", "--out", str(work / "eval")], check=True, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env={**os.environ, "TQDM_DISABLE": "1"})
        report = json.loads((work / "eval" / "report.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {**rec, "seed": seed, "model": (recipe.get("architecture") or {}).get("name")
            or (recipe.get("architecture") or {}).get("type"),
            "epochs": (recipe.get("train") or {}).get("epochs"),
            "precision": (info.get("precision") or {}).get("precision"),
            "saved": kind.name if kind.name != "ensemble" else
            f"blend, TF-IDF weight {blend.get('weight')}",
            "train_seconds": info.get("train_seconds"),
            "accuracy": report.get("accuracy"), "macro_f1": report.get("macro_f1")}


def verdict(walls: list[float]) -> tuple[str, str]:
    """The mean wall time with its 95 % t-interval over the runs against :data:`TARGET_S`;
    one run is not judged."""
    iv = V.mean_interval(walls)
    if iv is None:
        return "not judged", f"{walls[0] / 60:.1f} min, one run (an interval needs two)"
    return V.judge_at_most(iv, TARGET_S), (f"mean {iv.mean / 60:.1f} min [{iv.low / 60:.1f}, "
                                           f"{iv.high / 60:.1f}] over {len(walls)} runs")


def _run_lines(data: dict[str, Any]) -> list[str]:
    """One record's lines: where, the verdict and each run."""
    runs = data["runs"]
    judged, measured = verdict([r["wall_s"] for r in runs])
    rows = [[str(r["seed"]), str(r["model"]), r.get("saved", "-"), str(r["epochs"]),
             str(r["precision"]),
             f"{r['wall_s'] / 60:.1f}", f"{r['cpu_s'] / 60:.1f}", str(r["peak_rss_mib"]),
             f"{100 * r['accuracy']:.2f}" if r.get("accuracy") is not None else "-",
             f"{100 * r['macro_f1']:.2f}" if r.get("macro_f1") is not None else "-"]
            for r in runs]
    return [f"**{H.run_machine(data)}**: `{data['command']}` ({data['date']}; each run a fresh "
            f"process, alone on the machine).", "",
            H.markdown_table(["target", "verdict", "measured"],
                             [["the default fine-tuning on CIC end to end <= 30 minutes "
                               "(2 cores)", judged, measured]], "lll"), "",
            H.markdown_table(["seed", "model", "saved as", "epochs", "precision", "wall min",
                              "CPU min", "peak RSS MiB", "test accuracy %", "test macro-F1 %"],
                             rows, "llllrrrrrr")]


def section(records: list[dict[str, Any]]) -> str:
    """The section: every record (one per invocation), oldest first, under its machine;
    without any, that the target is not measured yet."""
    if not records:
        text = (f"{HEADING}\n\nNot measured yet: run `python benchmarks/cic_train_time.py "
                f"--seeds 0,1,2` alone on the machine (the target, issue 38: the default "
                f"fine-tuning on CIC end to end at most 30 minutes on 2 cores).")
        return H.with_machine_line(text, [])
    return H.per_run_section([
        HEADING, "",
        "`headwise train --data train.json --valid dev.json --format clue --out DIR --seed S`"
        " as a team runs it (a fresh process, the console script, no `--model`: the default "
        "model for Chinese text and its family's defaults, `precision` auto); the wall time "
        "is the training command's, from start to the saved model. Test accuracy and "
        "macro-F1: `headwise eval` of the saved model on `test_public.json`, outside the "
        "timed part (the closed-set scores of the same recipe over seeds: `intent:cpu`)."],
        records, _run_lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", type=Path, default=HERE.parent.parent / "shared" / "data")
    p.add_argument("--seeds", default="0,1,2")
    H.add_run_args(p, RESULTS)
    args = p.parse_args(argv)
    data = H.new_run(2, runs=[])
    for seed in (int(s) for s in args.seeds.split(",")):
        r = run_once(args.data_dir, seed)
        data["runs"].append(r)
        print(f"seed {seed}: {r['wall_s'] / 60:.1f} min, accuracy {r['accuracy']}",
              file=sys.stderr, flush=True)
    H.finish_run(args, data, SECTION, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
