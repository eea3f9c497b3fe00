"""Compound intents and slots: a joint model, its tokenizer, thresholds and value normaliser.

:class:`CompoundClassifier` answers a customer question with every intent it expresses
(one sigmoid per intent, each passing its tuned threshold) and its slots as character
spans with normalised values::

    clf = CompoundClassifier.load("runs/compound")
    clf.predict(["I was charged twice for a £50 transfer, refund it"])[0].to_dict()
    # {"intents": [{"intent": "refund", "confidence": 0.97}, ...],
    #  "slots": [{"name": "amount_of_money", "start": 31, "end": 34, "text": "£50",
    #             "value": {"amount": 50.0, "currency": "GBP"}}], ...}

It is saved as a headwise model directory plus ``compound.json`` (intents, thresholds,
reference date, training summary), written last and atomically.

A compound model trained with ``levers.blend="tfidf"`` may carry a one-vs-rest TF-IDF model
(:class:`~headwise.intent.tfidf.TfidfOneVsRest`, saved beside the network as
``blend_tfidf.json`` and ``blend_tfidf.safetensors``, no pickle) and its share ``w``: each
intent's probability is then ``(1 - w) * p_network + w * p_tfidf``, on either runtime (the
network's part from PyTorch or onnxruntime, the TF-IDF part from scikit-learn's features);
the slots stay the network's (:mod:`headwise.intent.training.blending`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from headwise.intent.compound.thresholds import Thresholds, decide
from headwise.intent.inference.compound import CompoundPredictor
from headwise.intent.inference.runtime import TorchRuntime
from headwise.intent.kinds import COMPOUND
from headwise.intent.prediction import INTENT_THRESHOLD, OutOfScopeDecision, Prediction, check_texts
from headwise.loading import from_pretrained, save_pretrained
from headwise.models.io import write_json_atomically
from headwise.models.joint_heads import JointHeads
from headwise.slots import SCHEMAS, normalize_slot
from headwise.text.dataset import SlotSpan
from headwise.text.tokenizer import Tokenizer

if TYPE_CHECKING:
    from headwise.intent.tfidf import TfidfOneVsRest

COMPOUND_FILE = COMPOUND.marker  # "compound.json"
#: the name of a blend's TF-IDF model files in the model directory (``.json`` and
#: ``.safetensors``)
BLEND_TFIDF = "blend_tfidf"


class CompoundClassifier:
    """A joint intent + slot model with its tokenizer, intents and thresholds.

    Args:
        model: a joint intent + slot model (:class:`~headwise.models.joint_heads.
            JointHeads`: the Transformer's ``JointIntentSlotModel``, the BiLSTM's
            ``BiLSTMJointModel``).
        tokenizer: the tokenizer whose ids the model reads.
        intents: intent names, index = output of the intent head.
        thresholds: the multi-label decision thresholds (default 0.5 for every intent).
        max_length: longest input in tokens, special tokens included.
        reference_date: "today" for relative dates (明天, next Friday); None: the date of
            each call.
        info: free-form training summary stored in ``compound.json``.
        tfidf: the one-vs-rest TF-IDF model blended with the network's intent
            probabilities (None: the network alone).
        tfidf_share: its share ``w`` of each intent's probability, in (0, 1) with
            ``tfidf``, 0 without.

    Raises:
        TypeError: the model is not a joint intent + slot model.
        ValueError: intents that do not match the intent head, per-intent thresholds
            of the wrong length, a TF-IDF model of other intents, or a share that does not
            fit it.
    """

    def __init__(self, model: JointHeads, tokenizer: Tokenizer, intents: Sequence[str],
                 *, thresholds: Thresholds | None = None, max_length: int = 128,
                 reference_date: date | None = None, info: dict[str, Any] | None = None,
                 tfidf: TfidfOneVsRest | None = None, tfidf_share: float = 0.0) -> None:
        if not isinstance(model, JointHeads):
            raise TypeError(f"a CompoundClassifier needs a joint intent + slot model, got "
                            f"{type(model).__name__}")
        intents = [str(x) for x in intents]
        if model.classifier.out_features != len(intents):
            raise ValueError(f"the model has {model.classifier.out_features} intent outputs but "
                             f"{len(intents)} intents were given")
        self.thresholds = thresholds or Thresholds(0.5)
        if self.thresholds.per_intent is not None and \
                len(self.thresholds.per_intent) != len(intents):
            raise ValueError(f"{len(self.thresholds.per_intent)} per-intent thresholds for "
                             f"{len(intents)} intents")
        if tfidf is None and tfidf_share != 0.0 or tfidf is not None and not (
                0.0 < tfidf_share < 1.0 and model.multi_label):
            raise ValueError(f"a TF-IDF share must be in (0, 1) with a TF-IDF model (and a "
                             f"multi-label head) and 0 without one, got {tfidf_share} "
                             f"{'with' if tfidf is not None else 'without'} one")
        if tfidf is not None and tfidf.intents != intents:
            raise ValueError("the blended TF-IDF model's intents are not the classifier's "
                             "(the same names in the same order)")
        self.tfidf = tfidf
        self.tfidf_share = float(tfidf_share)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.intents = intents
        self.max_length = int(max_length)
        self.reference_date = reference_date
        self.info = dict(info or {})

    @property
    def slot_tags(self) -> list[str]:
        """The BIO tag names of the slot tagger (empty without one)."""
        return list(self.model.config.slot_tags or [])

    # -- inference ---------------------------------------------------------------------
    def predictor(self, *, batch_size: int = 64) -> CompoundPredictor:
        """This classifier's predictor on the PyTorch runtime, truncating long texts: what
        :meth:`analyse` and :meth:`predict` run (the service and ``headwise predict`` run
        the same predictor).

        Args:
            batch_size: most texts in one forward pass.

        Raises:
            ValueError: ``batch_size < 1``.
        """
        return CompoundPredictor(self, TorchRuntime(self.model), max_rows=batch_size)

    def analyse(self, texts: Sequence[str], *, batch_size: int = 64
                ) -> tuple[np.ndarray, list[list[SlotSpan]]]:
        """Intent probabilities (n, intents) and the decoded slot spans (without values)
        of texts truncated to the maximum length (:meth:`predictor`).

        Raises:
            ValueError: an empty list or text; TypeError: a non-string item.
        """
        texts = check_texts(texts)
        predictor = self.predictor(batch_size=batch_size)
        rows = predictor.run(predictor.encode_truncated(texts))
        return predictor.probabilities(texts, rows), predictor.spans(texts, rows)

    def predict(self, texts: Sequence[str] | str, *, top_k: int = 3,
                thresholds: Thresholds | None = None, at_least_one: bool = False,
                batch_size: int = 64, reference_date: date | None = None
                ) -> list[Prediction]:
        """Intents, slots and normalised values of each text: :meth:`predictor`'s
        answers.

        Args:
            texts: one text or a list.
            top_k: how many of the most probable intents to list in ``top_k``.
            thresholds: override the saved thresholds.
            at_least_one: answer the most probable intent when none passes (never
                out-of-scope; the answers then carry no out-of-scope ``decision``).
            batch_size: texts per forward pass.
            reference_date: "today" for relative dates in the slot values (下个月5号, next
                Friday); None: the classifier's :attr:`reference_date`, else today's date.

        Returns:
            One :class:`~headwise.intent.prediction.Prediction` per text (see
            :meth:`answers`).

        Raises:
            ValueError: an empty list or text, ``top_k < 1``.
        """
        return self.predictor(batch_size=batch_size).predictions(
            texts, top_k=top_k, thresholds=thresholds, at_least_one=at_least_one,
            reference_date=reference_date)[0]

    def answers(self, texts: Sequence[str], probs: np.ndarray,
                spans: Sequence[Sequence[SlotSpan]], *, top_k: int,
                thresholds: Thresholds | None = None, at_least_one: bool = False,
                reference_date: date | None = None) -> list[Prediction]:
        """The answers to texts from their calibrated probabilities (n, intents) and slot
        spans (:meth:`analyse`, or the service's batched forward passes).

        Every intent that passes its threshold is answered, best first; a text with none is
        out of scope, and its ``decision`` names the intent nearest to its threshold (its
        probability and threshold). A slot span of a known kind whose text does not parse as
        a value of that kind (a tagger's stray 后 as ``rate_change_bp``) is left out; a slot
        name no schema knows keeps its span with value None (there is no normaliser for it).
        """
        thresholds = thresholds or self.thresholds
        chosen = self.chosen_intents(probs, thresholds, at_least_one)
        reference = self.reference(reference_date)
        limits = self.intent_thresholds(thresholds)
        answers = []
        for text, p, keep, found in zip(texts, probs, chosen, spans, strict=True):
            order = np.argsort(-p, kind="stable")
            intents = [(self.intents[j], float(p[j])) for j in order if keep[j]]
            nearest = int(np.argmax(p - limits))
            decision = None if at_least_one else OutOfScopeDecision(
                INTENT_THRESHOLD, float(p[nearest]), float(limits[nearest]))
            answers.append(Prediction(
                text=text, intents=intents,
                top_k=[(self.intents[j], float(p[j])) for j in order[:top_k]],
                out_of_scope=not intents, slots=self.resolve_slots(found, reference),
                decision=decision))
        return answers

    def intent_thresholds(self, thresholds: Thresholds) -> np.ndarray:
        """The threshold each intent must reach (intents,): the per-intent ones of a
        multi-label head; the one threshold of a single-label head (whose top intent alone
        can be answered)."""
        if self.model.multi_label:
            return thresholds.for_intents(len(self.intents))
        return np.full(len(self.intents), float(thresholds.threshold))

    def chosen_intents(self, probs: np.ndarray, thresholds: Thresholds, at_least_one: bool
                       ) -> np.ndarray:
        """Which intents each text has (n, intents) bool, from calibrated probabilities: a
        multi-label head keeps those over their thresholds (the best one when none is and
        ``at_least_one``); a single-label head its argmax, if confident enough."""
        if self.model.multi_label:
            return decide(probs, thresholds, at_least_one=at_least_one)
        top = probs.argmax(1)  # single-label head: the argmax, if it is confident enough
        keep = np.zeros_like(probs, dtype=bool)
        rows = np.arange(len(probs))
        keep[rows, top] = at_least_one | (probs[rows, top] >= thresholds.threshold)
        return keep

    @staticmethod
    def with_value(span: SlotSpan, reference: date) -> SlotSpan:
        """``span`` with its normalized value (None when the text does not parse), dates
        relative to ``reference``."""
        try:
            value = normalize_slot(span.name, span.text, reference=reference)
        except ValueError:
            value = None
        return SlotSpan(span.name, span.start, span.end, span.text, value)

    @classmethod
    def resolve_slots(cls, spans: Sequence[SlotSpan], reference: date) -> list[SlotSpan]:
        """``spans`` with their normalised values (:meth:`with_value`), leaving out each span
        of a slot that a value schema knows whose text does not parse as its kind: such a
        span is a tagging error, not a value to act on. Spans of slots no schema knows are
        kept with value None."""
        out = []
        for span in spans:
            resolved = cls.with_value(span, reference)
            if resolved.value is None and cls.has_schema(span.name):
                continue
            out.append(resolved)
        return out

    @staticmethod
    def has_schema(slot: str) -> bool:
        """Whether a value schema knows ``slot`` (so its spans are values of a kind)."""
        return any(slot in names for names in SCHEMAS.values())

    @classmethod
    def fits(cls, span: SlotSpan, reference: date) -> bool:
        """Whether ``span`` is kept by :meth:`resolve_slots`: its text parses as its slot's
        kind, or no schema knows its slot. The span decoder cuts a span that does not fit
        inside its edge tokens (:func:`~headwise.text.bio.tags_to_spans`)."""
        return cls.with_value(span, reference).value is not None or not cls.has_schema(span.name)

    def reference(self, reference_date: date | None = None) -> date:
        """The date slot values are normalised against: ``reference_date``, else the saved
        one, else today's."""
        return reference_date or self.reference_date or date.today()

    # -- persistence -------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write model, tokenizer and ``compound.json`` (last, atomically) into ``directory``."""
        directory = Path(directory)
        save_pretrained(self.model, self.tokenizer, directory)
        if self.tfidf is not None:
            self.tfidf.save(directory, BLEND_TFIDF)
        else:  # a blend an earlier save left there is no part of this model
            for suffix in (".json", ".safetensors"):
                (directory / f"{BLEND_TFIDF}{suffix}").unlink(missing_ok=True)
        blend = None if self.tfidf is None else {"tfidf_share": self.tfidf_share,
                                                 "tfidf": BLEND_TFIDF}
        meta = {"format": "headwise-compound", "version": 1, "intents": self.intents,
                "thresholds": self.thresholds.to_dict(), "max_length": self.max_length,
                "reference_date": None if self.reference_date is None
                else self.reference_date.isoformat(), "blend": blend, "info": self.info}
        write_json_atomically(directory / COMPOUND_FILE, meta)
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> CompoundClassifier:
        """Load a directory written by :meth:`save`.

        Raises:
            FileNotFoundError: no such directory, or no ``compound.json`` in it.
            ValueError: a ``compound.json`` that is not valid or does not match the model.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"no model directory at {directory}")
        meta_path = directory / COMPOUND_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"{directory} has no {COMPOUND_FILE}: it is not a compound "
                                    f"(multi-label) classifier saved by `headwise train`")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            intents = meta["intents"]
            thresholds = Thresholds.from_dict(meta["thresholds"])
            ref = meta.get("reference_date")
            reference = date.fromisoformat(ref) if ref else None
            blend = meta.get("blend")
            share = 0.0 if blend is None else float(blend["tfidf_share"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{meta_path} is not a valid compound-classifier file: {e}") from e
        tfidf = None
        if blend is not None:  # scikit-learn is imported only for a blend
            from headwise.intent.tfidf import TfidfOneVsRest

            tfidf = TfidfOneVsRest.load(directory, BLEND_TFIDF)
        model, tokenizer = from_pretrained(directory)
        return cls(model, tokenizer, intents, thresholds=thresholds,
                   max_length=meta.get("max_length", 128), reference_date=reference,
                   info=meta.get("info"), tfidf=tfidf, tfidf_share=share)

    def __repr__(self) -> str:
        blend = "" if self.tfidf is None else f", TF-IDF share {self.tfidf_share:g}"
        extra = "" if self.thresholds.additional is None else \
            f", additional={self.thresholds.additional:.3g}"
        return (f"CompoundClassifier({len(self.intents)} intents, {len(self.slot_tags)} tags, "
                f"threshold={self.thresholds.threshold:.3g}{extra}{blend})")
