"""Why the demo's from-scratch 8-head Transformer trails the BiLSTM on held-out phrasing, and
which one-lever change of its recipe helps: a grid fixed in advance, chosen on validation.

Per seed this script generates the demo corpus as ``headwise demo`` (and
``benchmarks/demo_heldout.py``) does, split by template family, and trains, each in its own
process, every member of the current grid (:data:`GRID`, number :data:`CURRENT_GRID`; an
earlier grid's records stay and are rendered under their own heading): the demo's
Transformer as it is (``base``,
:func:`headwise.demo.runner.demo_recipes`) and variants that change one field of that
recipe (or, named so, a combination of levers earlier grids measured alone), plus the demo's BiLSTM
as the reference. Each is scored on the validation split
(closed-set accuracy on in-scope questions, accuracy with its out-of-scope threshold) and
on the test split (closed-set accuracy and macro-F1, accuracy with the threshold, the same
per slice), with the per-row outcomes kept for paired comparisons.

The Transformer member with the best validation accuracy (closed-set, mean over the seeds
every member ran; ties: the first of the grid) is CHOSEN; a member that chooses a TF-IDF
share on the validation rows (``levers.blend``) enters the choice with its cross-fitted
validation accuracy (:func:`crossfit_blend`), never the in-sample one. Every member is
reported. The
verdicts compare the chosen one with the BiLSTM on the test split, paired by seed (the same
corpus for both): accuracy, and the ``negation_scope`` slice (the issue's target: the
Transformer at least the BiLSTM); and say whether the demo's recipe is the chosen one.
Records are appended to a JSON-lines file as each run finishes (an interrupted run
resumes; ``--render`` rebuilds the section)::

    python benchmarks/demo_transformer.py --seeds 0,1,2
    python benchmarks/demo_transformer.py --seeds 0,1,2 --configs blend_tfidf --rerun
    python benchmarks/demo_transformer.py --render

A smoke run (tiny corpus and models, two epochs, nothing published)::

    python benchmarks/demo_transformer.py --quick --seeds 0 --no-write \\
        --results /tmp/demo_transformer.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import _harness as H  # noqa: E402
import _verdicts as V  # noqa: E402

SECTION = "demo:transformer"
RESULTS = HERE / "results" / "demo_transformer.jsonl"
#: the reference model's name in the records (the demo's BiLSTM as it is)
REFERENCE = "bilstm"
#: the slices every record keeps per-row outcomes of, and the table shows
SLICES = ("negation_scope", "numbers", "plain")
#: the issue's slice: the chosen Transformer at least the BiLSTM on it
TARGET_SLICE = "negation_scope"
MIN_SEEDS = 3
#: what identifies a record (a re-run of the same key replaces it)
KEY = ("grid", "config", "seed")


@dataclass(frozen=True)
class Member:
    """One configuration of a grid: its ``name``, what it changes from ``base``
    (``change``, as recipe paths: one field, or ``fields`` of them for a member that
    combines levers earlier grids measured alone, said so in its grid's comment), why it
    is in the grid (``reason``) and how it is built from the demo's settings and its base
    recipe (``build``; None for a grid no longer run). A member that changes the training
    data instead of the recipe names it in ``corpus``: the extra arguments of
    ``generate_demo_corpus`` under the demo's settings (valid and test stay the same rows);
    the BiLSTM is then trained on that corpus too, as the member's own reference
    (:func:`reference_of`), so the verdicts compare like with like."""

    name: str
    change: str
    reason: str
    build: Callable[[Any, Any], Any] | None
    fields: int = 1
    corpus: Callable[[Any], dict[str, Any]] | None = None


def _overrides(recipe: Any, **extra: Any) -> dict[str, Any]:
    return {**recipe.architecture.model_overrides, **extra}


# Grid 1, fixed before its first run (2026-12-02): the demo's Transformer then (``base``:
# RoPE, number-aware heads 0 and 1, the corpus without off-topic training rows) and
# one-field changes of it, each a hypothesis for why a from-scratch Transformer trails a
# BiLSTM on phrasing it never saw in training. Multiples are of the demo's settings (the
# full run: 20 epochs, d_model 128, lr 1e-3), so that ``--quick`` scales them down.
#   base        - the reference every change is one step from.
#   dropout0.2  - overfitting the training phrasing: the test families share no template
#   dropout0.3    with training; a Transformer has no recurrence's inductive bias, and more
#                 dropout (embeddings and sublayers; default 0.1) is the plainest regulariser.
#   label_smoothing0.2 - overconfidence on the training templates (default 0.1): a softer
#                 target, the other cheap regulariser.
#   pretrain    - too little data for attention to learn which characters go together:
#                 masked-LM self-pretraining on the training texts (half the fine-tuning
#                 epochs) before fine-tuning, the usual remedy for a from-scratch encoder.
#   epochs_x2   - under-training: 20 epochs with warm-up may stop before attention settles
#                 (patience None: every epoch runs).
#   d_model_x2  - capacity: 128 wide with 8 heads is 16 per head; 256 is the library's
#                 default width.
#   lr_half     - optimisation: 1e-3 with 10 % warm-up may be too hot for post-warm-up
#                 attention.
#   negation_heads - the negation-aware heads exist (ModelConfig.negation_heads: a learned
#                 score bias towards negation-cue keys, like the number-aware heads the demo
#                 uses) and the demo does not turn them on: heads 2 and 3 of each layer,
#                 beside number heads 0 and 1; the slice is negation_scope.
# Validation chose negation_heads and the demo took it: grid 1 is no longer run (its base
# is not the demo's recipe any more); its records stay, rendered under their own heading.
#
# Grid 2, fixed before its first run (2026-12-03): the demo's Transformer now (``base``:
# grid 1's choice, negation-aware heads 2 and 3 on; the corpus with 150 off-topic training
# rows and the outlier-exposure default), and one-field changes of it. The question is the
# same: the Transformer still trails the BiLSTM on negation_scope (demo:heldout).
#   base        - the reference every change is one step from.
#   no_negation_heads - the adopted lever taken back: grid 1 measured it on the corpus
#                 without off-topic rows and within noise; is it still better?
#   negation_heads_x2 - too few heads read the cue: heads 2-5 negation-aware (4 of 8).
#   epochs_x2   - under-training (as in grid 1, on the new base).
#   dropout0.2  - overfitting the training phrasing (grid 1's best regulariser on
#                 validation after the chosen member).
#   pretrain    - too little data for attention (as in grid 1, on the new base).
#   blend_tfidf - character n-grams read "不是要..." as a feature of their own: blend the
#                 network with a TF-IDF model, the share chosen on validation (0 keeps the
#                 network alone; levers.blend, measured elsewhere on the public sets).
#   d_model_x2  - capacity (as in grid 1, on the new base).
# The BiLSTM (the demo's, as it is) is the reference, not a member: it is never chosen.
# Found when seed 2 was in (2026-12-03): blend_tfidf's validation accuracy was read on the
# rows that chose its TF-IDF share, so it could only gain there (it led on validation and
# trailed base on test). Every other member's closed-set validation accuracy is out of
# sample (no early stopping; calibration does not change the top intent), so the choice
# now reads the blend's cross-fitted accuracy (crossfit_blend), measured by re-running that
# member; its first records, without it, are superseded.
# Grid 2 chose blend_tfidf, which the demo does not take (DECIDED); no one-lever change of
# it came near the BiLSTM (about 7.5 points on validation).
#
# Grid 3, fixed before its first run (2026-12-03): the same base as grid 2 (the demo kept
# it) and a lever no earlier grid had, how the token vectors become one. The BiLSTM
# max-pools its states; the demo's Transformer mean-pools, and a mean over 20-60
# characters dilutes the one or two that carry a negation ("不", "别") or a deciding word.
#   base        - the reference (grid 2's base, re-measured at this grid's commit).
#   pooling_max - the element-wise maximum over real tokens (EncoderClassifier "max"),
#                 the BiLSTM's pooling: one strong token is not averaged away.
#   pooling_cls - the first token's state: a position that attention learns to fill with
#                 what decides, instead of a fixed average.
# Grid 3 measured pooling within noise (DECIDED): the demo keeps mean pooling.
#
# Grid 4, fixed before its first run (2026-12-03): the same base as grids 2 and 3, and a
# locality prior, which no earlier grid had. A BiLSTM reads in order, so the characters
# next to a word shape it first ("不想" before "开通"); the demo's Transformer, with RoPE,
# starts with no preference for near keys and must learn it from 120 rows per intent.
#   base        - the reference (grid 3's base, re-measured at this grid's commit).
#   position_alibi - ALiBi instead of RoPE (Press et al.): each head's scores fall with
#                 distance at its own slope (8 heads: 1/2 to 1/256), so some heads start
#                 nearly local and others nearly global; a graded prior.
#   window_5    - every head attends only within |i - j| < 5 (the core's sliding-window
#                 pattern: 9 characters, 17 after the 2 layers); a hard prior, the
#                 negation cue within a word or two of what it negates.
# Seeds 0-2 left position_alibi's lead within a wide interval; seeds 3 and 4 of every
# member were added (2026-12-03) to narrow it, the choice unchanged (validation only).
# Over 5 seeds its lead stayed within noise: the demo keeps RoPE (DECIDED).
#
# Grid 5, fixed before its first run (2026-12-03): the same base as grids 2-4, and a
# lever on the data the network sees, which no earlier grid had. Four grids of
# architecture and optimisation levers leave the Transformer as far under the BiLSTM on
# held-out phrasing; a from-scratch Transformer on 2.4k rows can fit each training
# template by one or two of its characters and ignore the rest.
#   base        - the reference (grid 4's base, re-measured at this grid's commit).
#   token_dropout0.1 - word dropout (Iyyer et al. 2015): each training step turns a tenth
#                 of the real tokens into the unknown token (never a negation cue, a
#                 number or a special token), so the answer must come from the rest.
#   token_dropout0.25 - the same at a quarter, the stronger end of the range the papers
#                 use.
#
# Grid 6, fixed before its first run (2026-12-03): the same base as grids 2-5, and a local
# composition step, which no earlier grid had. Grid 4's locality priors change where
# attention looks, not what a token is: the BiLSTM's state at "开通" already holds the "不想"
# before it, while the Transformer's first layer starts from single characters. A depthwise
# convolution over the token embeddings (ModelConfig.conv_kernel, the Conformer's depthwise
# step) gives every token its neighbours' values before attention, as n-grams.
#   base        - the reference (grid 5's base, re-measured at this grid's commit).
#   conv3       - a width-3 window: a character and one on each side.
#   conv5       - a width-5 window: two on each side (不想开通, 不用了 within one window).
# Grid 6 measured the convolution within noise (DECIDED): the demo keeps base.
#
# Grid 7, fixed before its first run (2026-12-03): the same base as grids 2-6, and the two
# locality levers that led base in the same direction, each within noise, together (a
# combination, not one lever: the member changes two fields, named below). Five seeds,
# fixed in advance.
#   base        - the reference (grid 6's base, re-measured at this grid's commit).
#   alibi_conv3 - ALiBi positions (grid 4's position_alibi) and the width-3 depthwise
#                 convolution before attention (grid 6's conv3): where attention looks and
#                 what a token is, both local at the start.
# Grid 7 measured the pair within noise (DECIDED): the demo keeps base.
#
# Grid 8, fixed before its first run (2026-12-04): the same base as grids 2-7, and the
# data, which every earlier grid held fixed. Seven grids of recipe levers leave the
# Transformer under the BiLSTM on negation_scope; the training split holds its negations
# only in its own families' minimal pairs and corrections, so a negated word next to the
# label's is rare, and what the negation-aware heads should learn is seldom asked. The
# member adds training rows that take one request back and keep another (提额就不用了，帮我
# 把年费免了: the negated topic is not the answer), from the training drop and clause
# families (generate_demo_corpus(dropped_train=...)), valid and test unchanged. Data is
# not a recipe: the BiLSTM gets the same rows (the member's reference, bilstm+<member>),
# and the verdicts compare the chosen member with the BiLSTM on its own corpus. Because
# the added rows come from another inventory (clauses, not templates), the record counts
# the test rows of the slice that share a longer substring with an added row than with any
# original training row, and the section reports the slice without them. Five seeds,
# fixed in advance.
#   base        - the reference (grid 7's base, re-measured at this grid's commit).
#   dropped_rows - 3 x per_intent such rows (360 on the full run, about 15 % of train).
# Grid 8 measured the rows within noise (DECIDED): the demo keeps base.
#
# Grid 9, fixed before its first run (2026-12-05): the same base as grids 2-8, and where
# the negation-aware heads put their bias, which no earlier grid changed. Their bias is on
# every query towards every cue of the message, so each token learns that a negation is
# present, not which request it takes back; in the corpus's contrasts and corrections both
# requests are in the message and only the scope tells them apart ("不是要注销卡，是要解冻").
# Scoped to the clause (ModelConfig.negation_scope, the classic approximation of negation
# scope, up to the punctuation, here both ways), only the tokens of the cue's own clause
# get the bias, so the negated request's tokens carry the cue and the kept one's do not.
#   base        - the reference (grid 8's base, re-measured at this grid's commit).
#   negation_clause - the negation-aware heads 2 and 3 scoped to the clause (bias start 1).
#   negation_clause_strong - the same, starting at 4 (the cue about 55 times as likely as
#                 another key): the scope acts from the first step instead of being
#                 learned from 120 rows per intent.
# Five seeds, fixed in advance.
# Validation chose negation_clause_strong and the demo took it (DECIDED): it is the base of
# grid 10.
#
# Grid 10, fixed before its first run (2026-12-05): the demo's Transformer now (``base``:
# grid 9's choice, negation heads scoped to the clause, their bias starting at 4). Grid
# 9's chosen member changed two fields at once, the scope and the start, and the scope
# alone (starting at 1) did nothing; this grid asks which of the two carries the lead.
#   base        - the reference (grid 9's choice, the demo's recipe).
#   negation_message - the scope taken back to the message, the start kept at 4: if it
#                 matches base, the stronger start is the lever and the scope is not.
# Five seeds, fixed in advance.
#: the reference member of every grid whose base is the demo's recipe of this commit
_BASE = Member("base", "none (the demo's recipe)", "the reference of every change",
               lambda s, r: r)
_GRID_1: tuple[Member, ...] = (
    Member("base", "none (the demo's recipe)", "the reference of every change", None),
    Member("dropout0.2", "architecture.dropout 0.1 -> 0.2",
           "overfitting the training phrasing", None),
    Member("dropout0.3", "architecture.dropout 0.1 -> 0.3",
           "overfitting the training phrasing", None),
    Member("label_smoothing0.2", "levers.label_smoothing 0.1 -> 0.2",
           "overconfidence on the training templates", None),
    Member("pretrain", "levers.pretrain_epochs 0 -> half the epochs",
           "too little data: masked-LM self-pretraining on the training texts", None),
    Member("epochs_x2", "train.epochs x2", "under-training", None),
    Member("d_model_x2", "architecture.d_model x2", "capacity", None),
    Member("lr_half", "train.lr / 2", "optimisation: a learning rate too high", None),
    Member("negation_heads", "architecture.model_overrides.negation_heads [2, 3]",
           "the negation-aware heads the demo leaves off", None),
)
_GRID_2: tuple[Member, ...] = (
    _BASE,
    Member("no_negation_heads", "architecture.model_overrides.negation_heads [2, 3] -> off",
           "the adopted lever taken back, on the new corpus",
           lambda s, r: r.replace(architecture__model_overrides={
               k: v for k, v in r.architecture.model_overrides.items()
               if k != "negation_heads"})),
    Member("negation_heads_x2", "architecture.model_overrides.negation_heads [2, 3] -> "
           "[2, 3, 4, 5]", "too few heads read the negation cue",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(
               r, negation_heads=[2, 3, 4, 5]))),
    Member("epochs_x2", "train.epochs x2", "under-training",
           lambda s, r: r.replace(train__epochs=2 * s.epochs)),
    Member("dropout0.2", "architecture.dropout 0.1 -> 0.2",
           "overfitting the training phrasing", lambda s, r: r.replace(architecture__dropout=0.2)),
    Member("pretrain", "levers.pretrain_epochs 0 -> half the epochs",
           "too little data: masked-LM self-pretraining on the training texts",
           lambda s, r: r.replace(levers__pretrain_epochs=max(1, s.epochs // 2))),
    Member("blend_tfidf", "levers.blend none -> tfidf",
           "character n-grams read the negation phrase as a feature of their own",
           lambda s, r: r.replace(levers__blend="tfidf")),
    Member("d_model_x2", "architecture.d_model x2", "capacity",
           lambda s, r: r.replace(architecture__d_model=2 * s.d_model)),
)
_GRID_3: tuple[Member, ...] = (
    _BASE,
    Member("pooling_max", "architecture.pooling mean -> max",
           "mean pooling dilutes the one token that decides (the BiLSTM max-pools)",
           lambda s, r: r.replace(architecture__pooling="max")),
    Member("pooling_cls", "architecture.pooling mean -> cls",
           "a learned position instead of a fixed average",
           lambda s, r: r.replace(architecture__pooling="cls")),
)
_GRID_4: tuple[Member, ...] = (
    _BASE,
    Member("position_alibi", "architecture.position rope -> alibi",
           "a graded locality prior: each head's scores fall with distance at its own slope",
           lambda s, r: r.replace(architecture__position="alibi")),
    Member("window_5", "architecture.model_overrides.attention_pattern none -> "
           "sliding_window 5", "a hard locality prior: every head sees 9 characters",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(
               r, attention_pattern={"sliding_window": 5}))),
)
_GRID_5: tuple[Member, ...] = (
    _BASE,
    Member("token_dropout0.1", "levers.token_dropout 0 -> 0.1",
           "no single token of a training phrasing may carry the answer alone",
           lambda s, r: r.replace(levers__token_dropout=0.1)),
    Member("token_dropout0.25", "levers.token_dropout 0 -> 0.25",
           "the same, stronger", lambda s, r: r.replace(levers__token_dropout=0.25)),
)
_GRID_6: tuple[Member, ...] = (
    _BASE,
    Member("conv3", "architecture.model_overrides.conv_kernel 0 -> 3",
           "tokens start from single characters: a width-3 depthwise convolution first",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(r, conv_kernel=3))),
    Member("conv5", "architecture.model_overrides.conv_kernel 0 -> 5",
           "the same with two characters on each side",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(r, conv_kernel=5))),
)
_GRID_7: tuple[Member, ...] = (
    _BASE,
    Member("alibi_conv3", "architecture.position rope -> alibi and "
           "architecture.model_overrides.conv_kernel 0 -> 3",
           "grids 4 and 6's locality levers together: ALiBi and a width-3 convolution",
           lambda s, r: r.replace(architecture__position="alibi",
                                  architecture__model_overrides=_overrides(r, conv_kernel=3)),
           fields=2),
)
_GRID_8: tuple[Member, ...] = (
    _BASE,
    Member("dropped_rows", "corpus: dropped_train 0 -> 3 x per_intent (training rows that "
           "take a request back and keep another)",
           "a negated request next to the answer is rare in the training split",
           lambda s, r: r, corpus=lambda s: {"dropped_train": 3 * s.per_intent}),
)
_GRID_9: tuple[Member, ...] = (
    _BASE,
    Member("negation_clause", "architecture.model_overrides.negation_scope message -> clause",
           "the negation heads' bias on every query tells a token that a negation is "
           "present, not which request it takes back",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(
               r, negation_scope="clause"))),
    Member("negation_clause_strong", "architecture.model_overrides.negation_scope message -> "
           "clause and negation_bias_init 1 -> 4",
           "the same, the scope acting from the first step",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(
               r, negation_scope="clause", negation_bias_init=4.0)), fields=2),
)
_GRID_10: tuple[Member, ...] = (
    _BASE,
    Member("negation_message", "architecture.model_overrides.negation_scope clause -> message",
           "the stronger start, not the scope, may carry grid 9's lead",
           lambda s, r: r.replace(architecture__model_overrides=_overrides(
               r, negation_scope="message"))),
)
#: every grid by number; only :data:`CURRENT_GRID` is run, the others are rendered
GRIDS: dict[int, tuple[Member, ...]] = {1: _GRID_1, 2: _GRID_2, 3: _GRID_3, 4: _GRID_4,
                                        5: _GRID_5, 6: _GRID_6, 7: _GRID_7, 8: _GRID_8,
                                        9: _GRID_9, 10: _GRID_10}
CURRENT_GRID = 10
#: the first grid whose base is the demo's recipe of this commit: the members of earlier
#: grids were built on a recipe the demo has since changed (grid 9's choice was taken), so
#: they are rendered from their records and no longer built
BUILT_FROM = 10
#: what the base of each grid was (the section says it beside the grid's table)
BASES = {1: "RoPE, number-aware heads 0 and 1; the corpus without off-topic training rows",
         2: "RoPE, number-aware heads 0 and 1, negation-aware heads 2 and 3; the corpus with "
            "off-topic training rows, trained on them by outlier exposure (the default)",
         3: "grid 2's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3, mean pooling; the corpus with off-topic training rows, trained "
            "on them by outlier exposure",
         4: "grid 3's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3, mean pooling, no attention pattern; the corpus with off-topic "
            "training rows, trained on them by outlier exposure",
         5: "grid 4's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3, mean pooling, no word dropout; the corpus with off-topic "
            "training rows, trained on them by outlier exposure",
         6: "grid 5's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3, mean pooling, no word dropout, no convolution; the corpus with "
            "off-topic training rows, trained on them by outlier exposure",
         7: "grid 6's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3, mean pooling, no word dropout, no convolution; the corpus with "
            "off-topic training rows, trained on them by outlier exposure",
         8: "grid 7's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3, mean pooling, no word dropout, no convolution; the corpus with "
            "off-topic training rows, trained on them by outlier exposure, and no rows "
            "taking a request back",
         9: "grid 8's (the demo kept it): RoPE, number-aware heads 0 and 1, negation-aware "
            "heads 2 and 3 biased on every query (negation_scope message), mean pooling, no "
            "word dropout, no convolution; the corpus with off-topic training rows, trained "
            "on them by outlier exposure, and no rows taking a request back",
         10: "grid 9's choice (the demo took it): RoPE, number-aware heads 0 and 1, "
             "negation-aware heads 2 and 3 scoped to the clause with their bias starting at "
             "4, mean pooling, no word dropout, no convolution; the corpus with off-topic "
             "training rows, trained on them by outlier exposure"}
#: what the demo's recipe did with a grid's chosen member after the grid was measured, by
#: grid and member: what the section says of it
DECIDED = {
    1: {"negation_heads": "After these records the demo's recipe took this member's change "
                          "(`headwise.demo.runner.demo_recipes` turns the negation-aware heads "
                          "2 and 3 on): it is the base of grid 2."},
    2: {"blend_tfidf": "The demo's recipe does not take it: the demo's table compares single "
                       "models (the Transformer with the BiLSTM, as the case study does), and "
                       "this member answers with two, the network and a TF-IDF model, on the "
                       "seeds where validation keeps a share; its lead over base is within "
                       "noise, and so is every member's. The demo keeps `base`; no one-lever "
                       "change of grid 2 brings the Transformer near the BiLSTM on validation."},
    3: {"pooling_max": "The demo's recipe does not take it: its lead over base is within "
                       "noise (a tenth of a point; cls pooling is as close), and the demo's "
                       "head report reads the heads by attention rollout, which needs a "
                       "fixed mix of positions that max pooling does not have. How the "
                       "Transformer pools is not why it trails the BiLSTM."},
    4: {"position_alibi": "The demo's recipe does not take it: its lead over base is within "
                          "noise over five seeds (seeds 3 and 4 were run after the first "
                          "three because the interval was wide; the choice still reads "
                          "validation only), as grid 3's was. ALiBi lifts the validation "
                          "negation_scope slice, yet no locality prior, graded or hard, "
                          "brings the Transformer near the BiLSTM on validation."},
    5: {"token_dropout0.1": "The demo's recipe does not take it: its lead over base is "
                            "within noise, as every lead of grids 2-4 was. Word dropout "
                            "does not bring the Transformer near the BiLSTM on validation "
                            "either: five grids of one-lever changes (heads, regularisation, "
                            "capacity, epochs, self-pretraining, a TF-IDF blend, pooling, "
                            "locality, word dropout) leave it about the same distance under."},
    6: {"conv3": "The demo's recipe does not take it: its lead over base is within noise "
                 "over five seeds (fixed in advance), as every lead of grids 2-5 was. A "
                 "width-3 convolution before attention narrows the test gap to the BiLSTM "
                 "without closing it; two locality levers, ALiBi (grid 4) and the "
                 "convolution, lead base in the same direction, each within noise."},
    7: {"alibi_conv3": "The demo's recipe does not take it: together the two locality "
                       "levers lead base within noise over five seeds (fixed in advance), "
                       "and the Transformer stays under the BiLSTM on test and on "
                       "negation_scope, where seven grids have not closed the gap."},
    8: {"dropped_rows": "The demo's corpus does not take them: their lead over base is "
                        "within noise over five seeds (fixed in advance). The same rows "
                        "lift the BiLSTM too, so against the BiLSTM on the same corpus the "
                        "Transformer stays under on test and on negation_scope, also on the "
                        "slice without the rows nearer an added one. Eight grids, seven of "
                        "the recipe and one of the data, leave the demo's from-scratch "
                        "Transformer under the BiLSTM on held-out phrasing, most on "
                        "negation_scope; of the demo's models the pretrained encoder reads "
                        "negation best (`demo:heldout`)."},
    9: {"negation_clause_strong": "After these records the demo's recipe took this "
                                  "member's change (`headwise.demo.runner.demo_recipes`: "
                                  "the negation-aware heads scoped to the clause, their "
                                  "bias starting at 4): it is the member validation chose, "
                                  "it costs no parameter and no time, and it lifts the "
                                  "validation negation_scope slice, the issue's; its lead "
                                  "over base is within noise over five seeds fixed in "
                                  "advance (four of the five ahead). It is the first member "
                                  "of nine grids whose test verdicts against the BiLSTM are "
                                  "within noise rather than FAIL. The scope alone (starting "
                                  "at 1) does nothing; grid 10 asks whether the scope or "
                                  "the stronger start carries the lead."},
}
GRID = GRIDS[CURRENT_GRID]


def members(grid: int = CURRENT_GRID) -> tuple[str, ...]:
    """A grid's Transformer members' names, in the order ties are broken (the first wins)."""
    return tuple(m.name for m in GRIDS[grid])


def configs(grid: int = CURRENT_GRID) -> tuple[str, ...]:
    """Every configuration a seed of a grid runs: the members, then the reference, then the
    reference on the corpus of each member that changes the data."""
    return (*members(grid), REFERENCE,
            *(f"{REFERENCE}+{m.name}" for m in GRIDS[grid] if m.corpus is not None))


def reference_of(member: str, grid: int = CURRENT_GRID) -> str:
    """The configuration a member's verdicts compare it with: the BiLSTM trained on the
    member's corpus (:data:`REFERENCE`, or ``bilstm+<member>`` for a member that changes
    the training data)."""
    m = next((x for x in GRIDS[grid] if x.name == member), None)
    return f"{REFERENCE}+{member}" if m is not None and m.corpus is not None else REFERENCE


def _data_member(config: str, grid: int) -> Member | None:
    """The member whose training data a configuration uses (itself, or for
    ``bilstm+<member>`` that member), when that member changes the data."""
    name = config.split("+", 1)[1] if config.startswith(f"{REFERENCE}+") else config
    m = next((x for x in GRIDS[grid] if x.name == name), None)
    return m if m is not None and m.corpus is not None else None


def changes_data(config: str, grid: int = CURRENT_GRID) -> bool:
    """Whether a configuration trains on a changed corpus (a data member or its
    reference)."""
    return _data_member(config, grid) is not None


def corpus_of(config: str, s: Any, grid: int = CURRENT_GRID) -> dict[str, Any]:
    """The extra ``generate_demo_corpus`` arguments a configuration trains with under the
    demo's settings ``s`` (a data member's, also for its reference ``bilstm+<member>``;
    none for the others)."""
    m = _data_member(config, grid)
    return m.corpus(s) if m is not None and m.corpus is not None else {}


MEMBERS = members()
CONFIGS = configs()


def settings(seed: int, quick: bool) -> Any:
    """The demo's settings of a seed (``demo_heldout``'s), or for ``quick`` its small ones
    with two epochs."""
    from headwise.demo.runner import DemoSettings

    return dataclasses.replace(DemoSettings.quick(seed), epochs=2) if quick \
        else DemoSettings(seed=seed)


def recipe_of(config: str, s: Any, grid: int = CURRENT_GRID) -> Any:
    """The recipe of a configuration of grid ``grid`` (default the current one,
    :data:`CONFIGS`) under the demo's settings ``s``, built on the demo's recipe of this
    commit.

    Raises:
        ValueError: a configuration the grid does not have, or a member of a grid whose
            base is not the demo's recipe any more (before :data:`BUILT_FROM`).
    """
    from headwise.demo.runner import demo_recipes

    recipes = demo_recipes(s)
    if config in configs(grid) and config.split("+", 1)[0] == REFERENCE:
        return recipes["bilstm"]
    member = next((m for m in GRIDS[grid] if m.name == config), None)
    if member is None:
        raise ValueError(f"unknown configuration {config!r}; one of {list(configs(grid))}")
    if member.build is None or grid < BUILT_FROM:
        raise ValueError(f"grid {grid}'s members were built on an earlier demo recipe; "
                         f"its records are rendered, its members no longer built")
    return member.build(s, recipes["transformer"])


def _bits(flags: list[bool]) -> str:
    return "".join("1" if f else "0" for f in flags)


#: random halvings of the validation rows a blend's share is cross-fitted over
CROSSFIT_REPEATS = 10


def crossfit_blend(clf: Any, recipe: Any, pairs: dict[str, list[tuple[str, str]]],
                   seed: int) -> dict[str, Any]:
    """The closed-set validation accuracy of a member that chooses a TF-IDF share on the
    validation rows (``levers.blend``), read on rows that did not choose it.

    The network (the ensemble's first member, or the model saved alone at share 0) and a
    TF-IDF model fitted as the training run fits it
    (:func:`headwise.intent.training.blending.blend_with_tfidf`, checked against the share
    scores the run recorded) answer the in-scope validation rows; the rows are halved at
    random :data:`CROSSFIT_REPEATS` times, and in each halving each half is answered at the
    share :func:`~headwise.intent.training.blending.choose_blend_weight` chooses on the
    other half (the library's rule, significance test included). The accuracy is the mean
    over the halvings: the share's choice is out of sample, as every other member's
    validation accuracy is."""
    import numpy as np

    from headwise.intent.training.blending import blend_with_tfidf, choose_blend_weight
    from headwise.text.labels import is_oos_label

    network = next((m for m in getattr(clf, "members", [clf]) if hasattr(m, "model")), clf)
    recorded = network.info["blend"]
    train = [(t, y) for t, y in pairs["train"] if not is_oos_label(y)]
    v_texts, v_labels = [t for t, _ in pairs["valid"]], [y for _, y in pairs["valid"]]
    _, again, tfidf, _ = blend_with_tfidf(network, [t for t, _ in train], [y for _, y in train],
                                          v_texts, v_labels, recipe)
    if not np.allclose(np.array(again.scores), np.array(recorded["scores"]), atol=1e-12):
        raise RuntimeError(f"the TF-IDF model refitted for the cross-fit scores the shares "
                           f"{again.scores}, the run recorded {recorded['scores']}")
    index = {name: i for i, name in enumerate(network.labels)}
    rows = [i for i, y in enumerate(v_labels) if y in index]
    gold = np.array([index[v_labels[i]] for i in rows])
    a = network.predict_proba([v_texts[i] for i in rows])
    b = tfidf.predict_proba([v_texts[i] for i in rows])
    rng = np.random.default_rng(seed)
    accuracies, shares = [], []
    for _ in range(CROSSFIT_REPEATS):
        half = np.zeros(len(rows), dtype=bool)
        half[rng.permutation(len(rows))[:len(rows) // 2]] = True
        right = 0
        for fold in (half, ~half):
            w = choose_blend_weight(a[~fold], b[~fold], gold[~fold],
                                    metric=recipe.task.select_on).weight
            shares.append(w)
            right += int((((1 - w) * a[fold] + w * b[fold]).argmax(axis=1)
                          == gold[fold]).sum())
        accuracies.append(right / len(rows))
    return {"accuracy": float(np.mean(accuracies)), "repeats": CROSSFIT_REPEATS,
            "shares": shares, "in_sample_share": recorded["weight"]}


def selection_accuracy(rec: dict[str, Any]) -> float | None:
    """The validation accuracy the choice reads: the closed-set accuracy on in-scope rows,
    or, for a member that chooses a TF-IDF share on those same rows (``levers.blend``),
    its cross-fitted one (:func:`crossfit_blend`); None for such a member's record made
    before the cross-fit was measured (its in-sample score favours it by construction)."""
    if ((rec.get("recipe") or {}).get("levers") or {}).get("blend", "none") != "none":
        return (rec["valid"].get("crossfit") or {}).get("accuracy")
    return rec["valid"]["accuracy"]


def _scores(predictor: Any, rows: list[Any], out_dir: Path) -> dict[str, Any]:
    """One split's scores through ``predictor`` (``headwise.intent.evaluation.evaluate``,
    as the demo scores) and its per-row outcomes: ``closed`` over the in-scope rows (top
    intent right), ``threshold`` over every row (right with the out-of-scope rule, an
    out-of-scope row right when rejected) and the same for each of :data:`SLICES`."""
    from headwise.intent.evaluation import evaluate
    from headwise.text.labels import is_oos_label

    texts, labels = [e.text for e in rows], [e.label for e in rows]
    report = evaluate(predictor, texts, labels, out_dir=out_dir, slices=[e.slices for e in rows])
    answers, _ = predictor.predictions(texts, top_k=1)
    top = [a.top_k[0][0] for a in answers]
    rejected = [a.out_of_scope for a in answers]
    oos = [is_oos_label(y) for y in labels]
    closed = [t == y for t, y, o in zip(top, labels, oos, strict=True) if not o]
    right = [r if o else (t == y and not r)
             for t, y, o, r in zip(top, labels, oos, rejected, strict=True)]
    every = next(x for x in report["slices"] if x["slice"] == "all")
    if abs(sum(closed) / len(closed) - report["accuracy"]) > 1e-9 or \
            abs(sum(right) / len(right) - every["accuracy"]) > 1e-9:
        raise RuntimeError("the per-row outcomes disagree with evaluate's scores")
    return {
        **{k: report[k] for k in ("accuracy", "macro_f1", "reject_rate", "oos_recall")},
        "accuracy_with_threshold": report["in_scope_accuracy_with_threshold"],
        "n_in_scope": len(closed), "n": len(rows), "slices": report["slices"],
        "rows": {"closed": _bits(closed), "threshold": _bits(right),
                 **{sl: _bits([x for x, e in zip(right, rows, strict=True) if sl in e.slices])
                    for sl in SLICES}}}


#: the longest shared substring :func:`nearer_added` looks for (characters)
OVERLAP_CAP = 24


def longest_shared(texts: list[str], corpus: list[str], cap: int = OVERLAP_CAP) -> list[int]:
    """For each of ``texts``, the length of the longest substring (up to ``cap``
    characters) it shares with any text of ``corpus``."""
    best = [0] * len(texts)
    for n in range(1, cap + 1):
        grams = {c[i:i + n] for c in corpus for i in range(len(c) - n + 1)}
        hit = False
        for k, t in enumerate(texts):
            if best[k] == n - 1 and any(t[i:i + n] in grams for i in range(len(t) - n + 1)):
                best[k], hit = n, True
        if not hit:
            break
    return best


def nearer_added(texts: list[str], original: list[str], added: list[str]) -> list[bool]:
    """Whether each of ``texts`` shares a longer substring with an ``added`` training row
    than with any ``original`` one: the rows a data member may answer from words it added
    rather than from what it learned (reported apart)."""
    return [a > o for a, o in zip(longest_shared(texts, added), longest_shared(texts, original),
                                  strict=True)]


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One configuration on one seed: train it on the demo corpus, score it on the
    validation and test splits."""
    import torch

    from headwise.demo.corpus import generate_demo_corpus
    from headwise.demo.runner import ood_detector_name
    from headwise.intent import train_intent_classifier
    from headwise.intent.inference import load_predictor

    torch.set_num_threads(spec["threads"])
    s = settings(spec["seed"], spec.get("quick", False))
    recipe = recipe_of(spec["config"], s)
    extra = corpus_of(spec["config"], s)
    corpus = generate_demo_corpus(seed=s.seed, per_intent=s.per_intent, oos_train=s.oos_train,
                                  **extra)
    pairs = {k: [(e.text, e.label) for e in v] for k, v in corpus.items()}
    added: dict[str, Any] = {}
    if extra:
        original = {e.text for e in generate_demo_corpus(
            seed=s.seed, per_intent=s.per_intent, oos_train=s.oos_train)["train"]}
        rows = [e.text for e in corpus["test"] if TARGET_SLICE in e.slices]
        near = nearer_added(rows, sorted(original),
                            [t for t, _ in pairs["train"] if t not in original])
        added = {"rows": len(pairs["train"]) - len(original),
                 "nearer_added": {TARGET_SLICE: _bits(near)}}
    digest = hashlib.sha256(json.dumps(pairs["test"], ensure_ascii=False).encode()).hexdigest()
    out = Path(tempfile.mkdtemp(prefix="headwise-demo-transformer-"))
    try:
        start = time.perf_counter()
        trained = train_intent_classifier(pairs["train"], pairs["valid"], recipe,
                                          out_dir=out / "model")
        fit_seconds = time.perf_counter() - start
        clf = trained.classifier
        # the predictor `evaluate` builds for a classifier (PyTorch, long texts "auto")
        predictor = load_predictor(clf, runtime="torch", max_rows=64)
        scores = {split: _scores(predictor, corpus[split], out / split)
                  for split in ("valid", "test")}
        if recipe.levers.blend != "none":
            scores["valid"]["crossfit"] = crossfit_blend(clf, recipe, pairs, spec["seed"])
        # a blend (levers.blend) answers as an ensemble: count its network's parameters
        network = next((m for m in getattr(clf, "members", [clf]) if hasattr(m, "model")), clf)
        parameters = sum(p.numel() for p in network.model.parameters())
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"status": "ok", "quick": bool(spec.get("quick")), "grid": CURRENT_GRID,
            "model": recipe.architecture_name, "recipe": recipe.to_dict(),
            "settings": dataclasses.asdict(s),
            "corpus": {"sizes": {k: len(v) for k, v in pairs.items()}, "test_sha256": digest,
                       "extra": extra, **({"added": added} if added else {})},
            "train_seconds": trained.train_seconds, "fit_seconds": fit_seconds,
            "parameters": parameters,
            "ood_detector": ood_detector_name(clf), **scores}


# --- the report -----------------------------------------------------------------------------
def runs_of(runs: list[dict[str, Any]], grid: int) -> list[dict[str, Any]]:
    """The records of one grid."""
    return [r for r in runs if r.get("grid") == grid]


def by_config(runs: list[dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """The "ok" records by configuration, then by seed (the records of one grid)."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for r in runs:
        if r.get("status") == "ok":
            out.setdefault(r["config"], {})[r["seed"]] = r
    return out


def shared_seeds(table: dict[str, dict[int, dict[str, Any]]], configs: tuple[str, ...]
                 ) -> list[int]:
    """The seeds every one of ``configs`` present in ``table`` was measured on."""
    present = [table[c] for c in configs if c in table]
    return sorted(set.intersection(*(set(x) for x in present))) if present else []


def chosen_member(runs: list[dict[str, Any]], grid: int = CURRENT_GRID) -> str | None:
    """The Transformer member of ``grid`` with the best mean VALIDATION accuracy
    (closed-set, in-scope questions) over the seeds every measured member shares (a
    member's own seeds when they share none); ties go to the first of the grid. Test
    scores are never read."""
    table = by_config(runs_of(runs, grid))
    order = members(grid)
    # a member whose records lack an out-of-sample validation score is not comparable
    present = [m for m in order if m in table
               and all(selection_accuracy(r) is not None for r in table[m].values())]
    if not present:
        return None
    seeds = set(shared_seeds(table, tuple(present)))

    def score(m: str) -> float:
        rs = [r for sd, r in table[m].items() if sd in seeds] or list(table[m].values())
        return statistics.fmean(selection_accuracy(r) for r in rs)

    return max(present, key=lambda m: (score(m), -order.index(m)))


def _slice(rec: dict[str, Any], split: str, name: str) -> dict[str, Any]:
    return next(x for x in rec[split]["slices"] if x["slice"] == name)


def _mean(values: list[float], rows: int | None = None) -> str:
    """The mean over seeds in percent with its 95 % interval over seeds and ``rows`` rows
    (``_verdicts.score_interval``)."""
    return V.score_interval(values, rows).pct(1) if values else "-"


def _valid_cell(recs: list[dict[str, Any]]) -> str:
    """The table's validation accuracy: what the choice reads (:func:`selection_accuracy`),
    and for a member that chose a share on the validation rows its in-sample score beside
    it."""
    chosen_on = [selection_accuracy(r) for r in recs]
    if all(x is not None and x == r["valid"]["accuracy"]
           for x, r in zip(chosen_on, recs, strict=True)):
        return _plain_mean(chosen_on)
    in_sample = _plain_mean([r["valid"]["accuracy"] for r in recs])
    if any(x is None for x in chosen_on):
        return f"not comparable (in-sample {in_sample}; no cross-fit)"
    return f"{_plain_mean(chosen_on)} cross-fitted (in-sample {in_sample})"


def _plain_mean(values: list[float]) -> str:
    return f"{100 * statistics.fmean(values):.1f}" if values else "-"


def paired(runs: list[dict[str, Any]], a: str, b: str, metric: str
           ) -> tuple[V.Interval, str, list[int]] | None:
    """``a - b`` on the test ``metric`` (``"accuracy"``: closed-set on in-scope questions;
    a slice's name: accuracy with the threshold on its rows) over the seeds both ran on the
    same test rows: with two seeds or more, the mean of the per-seed differences and its
    t-interval over seeds (``_verdicts.seed_paired_difference``; each seed draws its own
    corpus, so the seeds' spread holds the rows' sampling too); with one, a paired
    bootstrap over that seed's rows (``_verdicts.paired_difference``). Returns (interval,
    method, seeds), None without a shared seed."""
    table = by_config(runs)
    if a not in table or b not in table:
        return None
    seeds = [sd for sd in sorted(set(table[a]) & set(table[b]))
             if table[a][sd]["corpus"]["test_sha256"] == table[b][sd]["corpus"]["test_sha256"]]
    if not seeds:
        return None

    def value(rec: dict[str, Any]) -> float:
        return rec["test"]["accuracy"] if metric == "accuracy" \
            else _slice(rec, "test", metric)["accuracy"]

    if len(seeds) >= 2:
        iv = V.seed_paired_difference([value(table[a][sd]) for sd in seeds],
                                      [value(table[b][sd]) for sd in seeds])
        return iv, f"paired by seed, t-interval over {len(seeds)} seeds", seeds
    key = "closed" if metric == "accuracy" else metric
    sd = seeds[0]
    iv = V.paired_difference([[c == "1" for c in table[a][sd]["test"]["rows"][key]]],
                             [[c == "1" for c in table[b][sd]["test"]["rows"][key]]])
    return iv, "one seed: paired bootstrap over its test rows", seeds


def _valid_difference(runs: list[dict[str, Any]], a: str, b: str) -> str:
    """``a - b`` on validation accuracy, seed-paired, in points (or why not)."""
    table = by_config(runs)
    seeds = sorted(set(table.get(a, {})) & set(table.get(b, {})))
    if len(seeds) < 2:
        return "not judged (fewer than two seeds)"
    if any(selection_accuracy(table[c][sd]) is None for c in (a, b) for sd in seeds):
        return "not comparable (no out-of-sample validation score)"
    iv = V.seed_paired_difference([selection_accuracy(table[a][sd]) for sd in seeds],
                                  [selection_accuracy(table[b][sd]) for sd in seeds])
    return f"{iv.points(1)} points"


def targets(runs: list[dict[str, Any]], chosen: str | None, grid: int = CURRENT_GRID) -> str:
    """The verdict table: the chosen member against the BiLSTM on the same corpus
    (:func:`reference_of`; test accuracy, the target slice) and whether the demo's recipe
    is the chosen one."""
    rows = []
    reference = reference_of(chosen, grid) if chosen else REFERENCE
    for metric, what in (("accuracy", "test accuracy (closed-set)"),
                         (TARGET_SLICE, f"{TARGET_SLICE} (accuracy with the threshold)")):
        got = paired(runs, chosen, reference, metric) if chosen else None
        if got is None:
            rows.append([f"chosen Transformer at least the BiLSTM: {what}", "NOT MEASURED",
                         "no seed with both measured on the same test rows"])
            continue
        iv, method, seeds = got
        verdict = V.judge(iv, 0.0)
        if verdict == "PASS" and len(seeds) < MIN_SEEDS:
            verdict = "PASS (incomplete)"
        rows.append([f"chosen Transformer ({chosen}) at least the BiLSTM: {what}", verdict,
                     f"{chosen} - {reference}: {iv.points(1)} points ({method})"])
    rows.append(["the demo's recipe (`base`) is the member chosen on validation",
                 H.verdict([chosen == "base"], 1) if chosen else "NOT MEASURED",
                 f"chosen {chosen}" if chosen else "no Transformer member measured"])
    return H.markdown_table(["target", "verdict", "measured"], rows, "lll")


def without_nearer(runs: list[dict[str, Any]], member: str, grid: int = CURRENT_GRID
                   ) -> str | None:
    """For a member that adds training rows: how many test rows of the target slice share a
    longer substring with an added row than with any original training row
    (:func:`nearer_added`), and the member minus its reference on the slice's other rows,
    paired by seed (None for a member that adds no rows, or with fewer than two seeds)."""
    reference = reference_of(member, grid)
    table = by_config(runs)
    if reference == REFERENCE or member not in table or reference not in table:
        return None
    seeds = sorted(sd for sd in set(table[member]) & set(table[reference])
                   if table[member][sd]["corpus"]["test_sha256"]
                   == table[reference][sd]["corpus"]["test_sha256"])
    if len(seeds) < 2:
        return None
    near_n = total = 0
    ours, theirs = [], []
    for sd in seeds:
        near = table[member][sd]["corpus"]["added"]["nearer_added"][TARGET_SLICE]
        keep = [c == "0" for c in near]
        near_n, total = near_n + keep.count(False), total + len(keep)
        for rec, out in ((table[member][sd], ours), (table[reference][sd], theirs)):
            bits = [c == "1" for c in rec["test"]["rows"][TARGET_SLICE]]
            kept = [b for b, k in zip(bits, keep, strict=True) if k]
            out.append(sum(kept) / len(kept))
    iv = V.seed_paired_difference(ours, theirs)
    return (f"Added rows near the test slice: {near_n} of {total} test {TARGET_SLICE} rows "
            f"(seeds {','.join(map(str, seeds))} together) share a longer substring with a "
            f"row `{member}` added than with any original training row; on the other rows, "
            f"{member} - {reference}: {iv.points(1)} points (paired by seed).")


TITLE = "## The demo's from-scratch Transformer: one lever at a time, chosen on validation"


def render(runs: list[dict[str, Any]]) -> str:
    """The section: the current grid's table, choice and verdicts, then each earlier grid's
    under a heading of its own (its records measured the base of their time)."""
    current = runs_of(runs, CURRENT_GRID)
    lines = [_render_grid(current, CURRENT_GRID, TITLE) if by_config(current) else
             f"{TITLE}\n\nGrid {CURRENT_GRID} (base: {BASES[CURRENT_GRID]}): nothing "
             f"measured yet (`python benchmarks/demo_transformer.py --seeds 0,1,2`)." + (
                 "\n\n" + "\n".join(H.not_measured(current, _run_name))
                 if current else "")]
    for grid in sorted(GRIDS, reverse=True):
        if grid != CURRENT_GRID and by_config(runs_of(runs, grid)):
            title = f"### Grid {grid} {H.EARLIER_MARK}grid; base: {BASES[grid]})"
            lines.append(_render_grid(runs_of(runs, grid), grid, title))
    return "\n\n".join(lines)


def _render_grid(runs: list[dict[str, Any]], grid: int, title: str) -> str:
    """One grid's part of the section from its records (``runs``, that grid's only)."""
    table = by_config(runs)
    grid_members, decided = GRIDS[grid], DECIDED.get(grid, {})
    chosen = chosen_member(runs, grid)
    seeds = shared_seeds(table, tuple(m for m in members(grid) if m in table))
    commands = sorted({r["command"] for r in runs if r.get("status") == "ok"})
    dates = sorted(r["date"] for r in runs if r.get("status") == "ok")
    # the sizes the section states are those of a configuration on the unchanged corpus
    plain = [c for c in table if not changes_data(c, grid)]
    first = next(iter(table[(plain or list(table))[0]].values()))
    sizes, st = first["corpus"]["sizes"], first["settings"]
    n_valid, n_test = first["valid"]["n_in_scope"], first["test"]["n_in_scope"]
    change = {m.name: m.change for m in grid_members}
    change.update({f"{REFERENCE}+{m.name}": f"the demo's BiLSTM on `{m.name}`'s corpus "
                   f"(its reference)" for m in grid_members if m.corpus is not None})
    rows = []
    for config in configs(grid):
        if config not in table:
            rows.append([config, change.get(config, "the demo's BiLSTM (reference)"),
                         *["not measured"] * (8 + len(SLICES))])
            continue
        recs = [table[config][sd] for sd in sorted(table[config])]
        name = f"**{config}** (chosen)" if config == chosen else config
        if config == REFERENCE:
            name += " (reference)"
        rows.append([
            name, change.get(config, "the demo's BiLSTM (reference)"),
            ",".join(map(str, sorted(table[config]))),
            _valid_cell(recs),
            "-" if config == "base" or config.split("+", 1)[0] == REFERENCE
            else _valid_difference(runs, config, "base"),
            _plain_mean([r["valid"]["accuracy_with_threshold"] for r in recs]),
            _plain_mean([_slice(r, "valid", TARGET_SLICE)["accuracy"] for r in recs]),
            _mean([r["test"]["accuracy"] for r in recs], n_test),
            _mean([r["test"]["macro_f1"] for r in recs]) if len(recs) > 1
            else _plain_mean([r["test"]["macro_f1"] for r in recs]),
            *(_mean([_slice(r, "test", sl)["accuracy"] for r in recs],
                    _slice(recs[0], "test", sl)["n"]) for sl in SLICES),
            f"{statistics.median(r['fit_seconds'] for r in recs):.0f}"])
    grid_table = H.markdown_table(
        ["configuration", "change from base", "seeds", "valid accuracy %",
         "valid minus base, points [95 %]",
         "valid with threshold %", f"valid {TARGET_SLICE} %", "test accuracy % [95 %]",
         "test macro-F1 % [95 %]",
         *(f"test {sl} % [95 %]" for sl in SLICES), "training s (median)"], rows,
        "ll" + "r" * (8 + len(SLICES)))
    slice_n = ", ".join(f"{sl} {_slice(first, 'test', sl)['n']}" for sl in SLICES)
    reasons = [f"- `{m.name}`: {m.change}; {m.reason}." for m in grid_members]
    if chosen is None:
        choice = "No Transformer member has been measured: nothing is chosen."
    elif chosen == "base":
        choice = (f"Chosen on validation (mean closed-set accuracy over seeds "
                  f"{','.join(map(str, seeds))}): `base`, the demo's recipe as it is; the "
                  f"demo's recipe equals the chosen one.")
    else:
        choice = (f"Chosen on validation (mean closed-set accuracy over seeds "
                  f"{','.join(map(str, seeds))}): `{chosen}` ({change[chosen]}); its "
                  f"validation accuracy minus base's: {_valid_difference(runs, chosen, 'base')}"
                  f" (seed-paired). The demo's recipe of the records' commit does NOT equal "
                  f"the chosen one." + (f" {decided[chosen]}" if chosen in decided else ""))
    data_note = (f" (a member that changes the training data has its own: the BiLSTM on "
                 f"that corpus, `{REFERENCE}+<member>`; the sizes above are the unchanged "
                 f"corpus's)" if any(m.corpus is not None for m in grid_members) else "")
    lines = [
        title, "",
        f"Produced by {', '.join(f'`{c}`' for c in commands)} between {dates[0]} and "
        f"{dates[-1]}; per-run records in `benchmarks/results/{RESULTS.name}` "
        f"(`python benchmarks/demo_transformer.py --render` rebuilds this section).", "",
        f"Per seed, the demo corpus as `headwise demo` generates it (split by template "
        f"family: held-out phrasing; seed {first['seed']}: train / valid / test "
        f"{sizes['train']} / {sizes['valid']} / {sizes['test']} questions, {n_valid} / "
        f"{n_test} in scope in valid / test; test slices {slice_n}), and each configuration "
        f"trained in its own process: the demo's Transformer at the records' commit "
        f"(`base`, `headwise.demo.runner.demo_recipes`: character tokens, d_model "
        f"{st['d_model']}, {st['num_layers']} layer{'s' * (st['num_layers'] != 1)}, 8 heads, "
        f"{BASES[grid]}, {st['epochs']} epochs) and members that change one field of it, "
        f"each a hypothesis fixed before the grid's first run (grid {grid} of "
        f"`benchmarks/demo_transformer.py`), and the demo's BiLSTM as the reference"
        f"{data_note}. "
        f"Validation: mean over seeds of the closed-set accuracy on in-scope questions (the "
        f"choice; minus base's, paired by seed with its t-interval over seeds) and the "
        f"accuracy with the out-of-scope threshold (chosen on validation, so "
        f"tuned there), and on the {TARGET_SLICE} slice (informative, not the choice). "
        f"Test: closed-set accuracy and macro-F1 on in-scope questions, and per slice the "
        f"accuracy with the threshold over all the slice's rows (an out-of-scope "
        f"row right when rejected), as `demo:heldout` reports them; mean over seeds [95 % "
        f"interval over seeds and rows; macro-F1: over seeds, none for one]. Training s: the "
        f"whole `train_intent_classifier` call (pretraining, training, calibration and the "
        f"out-of-scope rule). The Transformer member with "
        f"the best validation accuracy is chosen (ties: the first listed); a member that "
        f"chooses a TF-IDF share on the validation rows (`levers.blend`) is compared by its "
        f"cross-fitted validation accuracy (the share chosen on one random half of the rows, "
        f"read on the other, {CROSSFIT_REPEATS} halvings), its in-sample one shown beside it; "
        f"every member is "
        f"shown and none is chosen by a test score.", "",
        grid_table, "", "Why each member is in the grid:", "", *reasons, "", choice, "",
        targets(runs, chosen, grid), ""]
    for m in grid_members:
        line = without_nearer(runs, m.name, grid) if m.corpus is not None else None
        if line:
            lines += [line, ""]
    failed = [r for r in runs if r.get("status") != "ok"]
    if failed:
        lines += ["Runs that did not finish:", "", *H.not_measured(failed, _run_name), ""]
    return "\n".join(lines).rstrip()


def _run_name(r: dict[str, Any]) -> str:
    return f"{r.get('config')} seed {r.get('seed')}"


# --- the command ----------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--configs", default=",".join(CONFIGS),
                   help="the configurations to run (default: the whole current grid and "
                        "the reference)")
    p.add_argument("--quick", action="store_true",
                   help="the demo's quick settings with two epochs (a smoke run; never "
                        "published)")
    H.add_record_args(p, RESULTS, HERE.parent / "BENCHMARKS.md", timeout_s=1800.0,
                      unit="configuration")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if H.answered_as_worker(args, worker):
        return 0
    if args.quick and not args.no_write:
        sys.exit("--quick is a smoke run, not published; add --no-write")
    if not args.render:
        done = {} if args.rerun else H.done_runs(args.results, KEY)
        unknown = set(args.configs.split(",")) - set(CONFIGS)
        if unknown:
            sys.exit(f"unknown configurations {sorted(unknown)}; the current grid's: "
                     f"{', '.join(CONFIGS)}")
        todo = [(c, int(sd)) for sd in args.seeds.split(",") for c in CONFIGS
                if c in args.configs.split(",")
                and ((CURRENT_GRID, c, int(sd)) not in done
                     or done[(CURRENT_GRID, c, int(sd))].get("status") != "ok")]
        for i, (config, seed) in enumerate(todo, 1):
            print(f"[{i}/{len(todo)}] {config} seed {seed} ...", file=sys.stderr, flush=True)
            spec = {"config": config, "seed": seed, "threads": args.threads,
                    "quick": args.quick}
            rec = H.record_run(Path(__file__), spec, args.results, args.timeout,
                               grid=CURRENT_GRID, config=config, seed=seed)
            print(f"    {rec['status']} in {rec['wall_s']:.0f} s"
                  + (f": {rec.get('detail')}" if rec["status"] != "ok" else
                     f"; valid {100 * rec['valid']['accuracy']:.1f} %"),
                  file=sys.stderr, flush=True)
    runs = list(H.done_runs(args.results, KEY).values())
    if not args.no_write and any(r.get("quick") for r in runs):
        sys.exit(f"{args.results} holds smoke-run records (--quick); they are not published: "
                 f"add --no-write")
    body = H.render_records(render, runs, ("grid", "config"))
    H.print_or_write(args.md, SECTION, body, no_write=args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
