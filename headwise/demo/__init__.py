"""The demo: the built-in Chinese banking corpus, the runs of ``headwise demo``, and the
attention tour of ``headwise tour``.

* the corpus generator: :mod:`.corpus` (:func:`generate_demo_corpus`, split by template
  family so that no test question shares its phrasing with training), built from the
  intents' templates (:mod:`.templates`), shared templates and word lists
  (:mod:`.lexicon`), template families and splits (:mod:`.families`), rendering
  (:mod:`.render`), slot values (:mod:`.values`), the surface phenomena of real
  customers (:mod:`.phenomena`: fillers, typos, code-mixing, long context ...) and compound
  questions (:mod:`.joins`: several requests joined in one message, or one taken back);
* long messages: :mod:`.long_messages` (:func:`long_message_slice`: a held-out request at
  the start, middle or end of chatter 2 to 20 times the model's length);
* the runs: :mod:`.runner` (:func:`run_demo`: TF-IDF, BiLSTM, Transformer and, where
  installed, a pretrained encoder, compared per slice on held-out phrasing) and
  :mod:`.compound` (:func:`run_compound_demo`: the compound models, BiLSTM joint,
  Transformer joint and, where installed, pretrained joint, trained by
  :func:`train_compound_models` and compared on compound questions by
  :func:`compare_compound_models`);
* :mod:`.showcase`: the attention tour (masks, kernels and their timings).

This package sits above the intent system, which it drives; nothing below imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from headwise._lazy import lazy_names

if TYPE_CHECKING:
    from headwise.demo.compound import (
        compare_compound_models,
        run_compound_demo,
        train_compound_models,
    )
    from headwise.demo.corpus import (
        DemoExample,
        Slot,
        Span,
        generate_demo_corpus,
        read_demo_jsonl,
        write_demo_corpus,
    )
    from headwise.demo.long_messages import LongMessage, long_message_slice
    from headwise.demo.runner import DemoSettings, demo_recipes, pretrained_demo_recipe, run_demo
    from headwise.demo.templates import DEMO_INTENTS

#: public name -> the module that defines it, imported on first use (PEP 562)
_LAZY: dict[str, str] = {
    "compare_compound_models": "headwise.demo.compound",
    "run_compound_demo": "headwise.demo.compound",
    "train_compound_models": "headwise.demo.compound",
    "DEMO_INTENTS": "headwise.demo.templates",
    "DemoExample": "headwise.demo.corpus",
    "Slot": "headwise.demo.corpus",
    "Span": "headwise.demo.corpus",
    "generate_demo_corpus": "headwise.demo.corpus",
    "read_demo_jsonl": "headwise.demo.corpus",
    "write_demo_corpus": "headwise.demo.corpus",
    "LongMessage": "headwise.demo.long_messages",
    "long_message_slice": "headwise.demo.long_messages",
    "DemoSettings": "headwise.demo.runner",
    "demo_recipes": "headwise.demo.runner",
    "pretrained_demo_recipe": "headwise.demo.runner",
    "run_demo": "headwise.demo.runner",
}

__all__ = ["DEMO_INTENTS", "DemoExample", "DemoSettings", "LongMessage", "Slot", "Span",
           "compare_compound_models", "demo_recipes", "generate_demo_corpus",
           "long_message_slice", "pretrained_demo_recipe", "read_demo_jsonl",
           "run_compound_demo", "run_demo", "train_compound_models", "write_demo_corpus"]

__getattr__, __dir__ = lazy_names(__name__, globals(), _LAZY)
