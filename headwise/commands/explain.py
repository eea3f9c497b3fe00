"""``headwise explain MODEL TEXT``: why one text got its answer.

The answer (intents and confidences, as ``headwise predict``), each token's attribution
to the explained intent (integrated gradients over the input embeddings for a network, the
features' weights for a TF-IDF model) with its completeness error, and for a network with
attention heads the heads that attend most to the deciding tokens, with the roles a head
analysis (``headwise inspect``, ``--report``) gave them. ``--json`` prints one JSON object:
``intents``, ``tokens`` (``token``, ``start``, ``end``, ``special``, ``attribution``),
``heads``, ``completeness``, ``explained`` (every explained intent: a compound model
explains each intent it answers), ``truncated``, ``long_text``, ``window`` and
``tfidf_share`` (a blended compound model's TF-IDF share of each intent's probability,
which the attributions of the network do not explain; 0 otherwise).

The answer is ``headwise predict``'s: the same predictor (runtime auto) and long-text
policy (``--long-text``, default auto: a single network's architecture's). A text over
the model's maximum length is explained as that policy read it: the span read again
whose answer was kept (``chunk_span``, else its window), the window whose answer was
kept (``chunk_max``, ``chunk_in_scope``), the
first window (``truncate``) or the head and tail
(``head_tail``); ``window`` gives the characters it covers (``start``, ``end``, and
``skipped``: the middle that ``head_tail`` does not read), the tokens' offsets are in the
whole text, and ``long_text`` is predict's note. A text answered from the mean of its
windows (``--long-text chunk``) is refused. See :mod:`headwise.inspect.attribution`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from headwise.commands._common import (
    LONG_TEXT_POLICIES,
    LONG_TEXT_WINDOW_HELP,
    long_text_choice,
)

#: characters of a bar for the largest attribution in the plain output
BAR = 20


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explain", help="explain one text's answer: token attribution and the deciding heads",
        description="The answer to TEXT, each token's attribution to the answered intent "
        "(integrated gradients over the input embeddings for a network: Transformer, "
        "pretrained encoder, BiLSTM, compound; the features' weights for a TF-IDF model) "
        "with its completeness error (the attributions sum to the logit's difference from "
        "the baseline, within a stated tolerance), and the attention heads that attend most "
        "to the deciding tokens, with their roles (negation, number, previous/next ...) from "
        "a head analysis when --report names one. The answer is `headwise predict`'s: a text "
        "over the model's maximum length is explained as --long-text read it (auto, for a "
        "network chunk_span: the span whose answer was kept), with offsets in the whole "
        "text and the characters of that window. An ensemble is refused: explain a member; "
        "so is a long text under --long-text chunk (answered from the mean of its windows).")
    p.add_argument("model", metavar="MODEL", help="directory saved by `headwise train`")
    p.add_argument("text", metavar="TEXT", help="the text to explain")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--intent", action="append", metavar="NAME",
                   help="explain this intent instead of the answer's (repeatable)")
    p.add_argument("--long-text", type=long_text_choice, default="auto",
                   metavar="POLICY[:N]",
                   help="past the model's length, as `headwise predict --long-text`: auto "
                   "(the architecture's: explain the window or span that answered), "
                   + ", ".join(LONG_TEXT_POLICIES[1:]) + LONG_TEXT_WINDOW_HELP)
    p.add_argument("--report", metavar="DIR",
                   help="a `headwise inspect` report directory of this model: the heads' "
                        "roles come from its stats.json")
    p.set_defaults(func=run)


def _roles(report: str | None) -> list | None:
    if report is None:
        return None
    path = Path(report) / "stats.json"
    if not path.is_file():
        raise ValueError(f"--report {report}: no stats.json (a `headwise inspect --out` "
                         f"directory holds one)")
    roles = json.loads(path.read_text(encoding="utf-8")).get("roles")
    if roles is None:
        raise ValueError(f"{path} holds no head roles")
    return roles


def result(model: str, text: str, *, intents: list[str] | None = None,
           report: str | None = None, heads: int = 5,
           long_text: str = "auto", chunk_length: float | int | None = None
           ) -> dict[str, Any]:
    """The JSON object ``headwise explain --json`` prints.

    Raises:
        ValueError: a kind that cannot be explained (the kind registry's reason), an
            unknown intent, a report without roles, a policy or window width
            (``chunk_length``, as ``load_predictor`` takes it) the kind cannot follow, a
            long text under ``reject`` or answered by ``chunk`` (the mean of its windows).
    """
    from headwise.inspect.attribution import explain
    from headwise.inspect.head_attribution import deciding_heads
    from headwise.intent.inference import load_predictor
    from headwise.intent.kinds import kind_of

    kind_of(model).require("explain", model)
    roles = _roles(report)
    # the predictor ``headwise predict`` runs (runtime auto), on the text's one encoding
    predictor = load_predictor(model, long_text=long_text, chunk_length=chunk_length)
    items = predictor.encode([text])
    rows = predictor.run(items)
    answer = predictor.answers([text], items, rows)[0].to_dict()
    ex = explain(predictor, text, answered=(items[0], rows[0]), intents=intents)
    first = ex.attributions[0]
    return {
        "model": Path(model).name, "text": text,
        "intents": answer["intents"], "top_k": answer["top_k"],
        "out_of_scope": answer["out_of_scope"], "slots": answer["slots"],
        "explained_intent": first.intent, "method": first.method,
        "truncated": ex.truncated, "long_text": ex.long_text, "window": window_record(ex),
        "tfidf_share": ex.tfidf_share,
        "tokens": [{"token": t, "start": s, "end": e, "special": sp,
                    "attribution": None if sp else float(v)}
                   for (t, s, e, sp), v in zip(ex.tokens, first.scores, strict=True)],
        "heads": deciding_heads(ex, roles=roles, top_heads=heads),
        "completeness": first.completeness(),
        "explained": [{"intent": a.intent, "attribution": [None if sp else float(v) for
                                                          (*_, sp), v in zip(ex.tokens,
                                                                             a.scores,
                                                                             strict=True)],
                       "completeness": a.completeness()} for a in ex.attributions],
    }


def window_record(ex: Any) -> dict[str, Any] | None:
    """The ``window`` of an :class:`~headwise.inspect.attribution.Explanation`: the
    characters of the text that the input explained covers, ``{"start", "end", "skipped"}``
    (``skipped``: ``{"start", "end"}`` of the middle a head-and-tail window does not read,
    else None); None when it is the whole text."""
    if ex.window is None:
        return None
    skipped = None if ex.skipped is None else {"start": ex.skipped[0], "end": ex.skipped[1]}
    return {"start": ex.window[0], "end": ex.window[1], "skipped": skipped}


def run(args: argparse.Namespace) -> int:
    policy, chunk_length = args.long_text
    out = result(args.model, args.text, intents=args.intent, report=args.report,
                 long_text=policy, chunk_length=chunk_length)
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    for line in render(out):
        print(line)
    return 0


def render(out: dict[str, Any]) -> list[str]:
    """The plain output for a person."""
    lines = []
    if out["out_of_scope"]:
        top = out["top_k"][0]
        lines.append(f"answer: out of scope (most probable: {top['intent']} "
                     f"{top['confidence']:.2f})")
    else:
        lines.append("answer: " + ", ".join(f"{i['intent']} {i['confidence']:.2f}"
                                            for i in out["intents"]))
    for explained in out["explained"]:
        c = explained["completeness"]
        how = "integrated gradients" if c["method"] == "integrated_gradients" \
            else "feature weights"
        verdict = "holds" if c["within_tolerance"] else "NOT within tolerance"
        evaluations = f", {c['steps']} gradient evaluations" if c["steps"] else ""
        lines.append(f"\nwhy {explained['intent']} ({how}): attributions sum to "
                     f"{c['sum']:+.4f}, the logit's change from the baseline is "
                     f"{c['delta']:+.4f}; completeness error {c['error']:+.2e} "
                     f"({c['relative_error']:.2%}, tolerance {c['tolerance']:.0%}: "
                     f"{verdict}{evaluations})")
        values = [v for v in explained["attribution"] if v is not None]
        scale = max((abs(v) for v in values), default=0.0) or 1.0
        for token, v in zip(out["tokens"], explained["attribution"], strict=True):
            if v is None:
                continue
            bar = ("+" if v >= 0 else "-") * round(BAR * abs(v) / scale)
            lines.append(f"  {token['token']:<12} {v:+9.4f}  {bar}")
    if out["heads"]:
        lines.append(f"\nheads attending most to the deciding tokens "
                     f"({', '.join(out['heads'][0]['tokens'])}):")
        for h in out["heads"]:
            roles = "roles unknown (--report)" if h["roles"] is None \
                else "/".join(h["roles"]) or "-"
            lines.append(f"  layer {h['layer']} head {h['head']}: {h['mass']:.0%} of its "
                         f"rollout on them; {roles}")
    if out["tfidf_share"]:
        lines.append(f"\n(the model blends a TF-IDF model into each intent's probability at "
                     f"share {out['tfidf_share']:.2g}: the attributions explain the network's "
                     f"logits, not that share)")
    if out["truncated"]:
        lines.append("\n(" + window_words(out) + ")")
    return lines


def window_words(out: dict[str, Any]) -> str:
    """How the plain output says which part of a long text was explained, e.g. ``long
    text: 100 tokens over 12, 19 chunks, answer from chunk 19; explained: characters
    212-234 of 234``."""
    from headwise.commands.predict import long_text_words

    note, window = out["long_text"], out["window"]
    head = long_text_words(note) if note is not None \
        else "the text was cut to the model's maximum length"
    if window is None:
        return head
    where = f"characters {window['start']}-{window['end']}"
    if window["skipped"] is not None:
        where += f" but {window['skipped']['start']}-{window['skipped']['end']}"
    return f"{head}; explained: {where} of {len(out['text'])}"
