"""A TF-IDF + logistic-regression intent classifier, saved without pickle.

The linear model on sparse n-gram features is the classic text-classification floor, and on
noisy training labels it is hard to beat: it cannot memorise a wrong label the way a
network trained to zero loss does. It is also a useful ensemble member next to neural
models, whose mistakes differ (:class:`~headwise.intent.ensemble.EnsembleClassifier`).

Features: character 1-3-grams for Chinese; word 1-2-grams and character 2-5-grams (within
word boundaries) otherwise; sublinear term frequencies (:func:`feature_vectorizers`). The
classifier is scikit-learn's multinomial ``LogisticRegression`` (L2, L-BFGS). A saved model
is ``tfidf.json`` (settings, vocabularies, IDF weights, intents) plus ``tfidf.safetensors``
(the coefficient matrix): plain data, no pickle to execute on load.

:class:`TfidfOneVsRest` is the multi-label form on the same features: one binary logistic
regression per intent (scikit-learn's ``OneVsRestClassifier``), a sigmoid each, the TF-IDF
part of a compound model's blend (``levers.blend="tfidf"`` with the multi-label task), saved
the same way under a name its owner gives.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file
from scipy import sparse

from headwise.intent.answering import CalibratedClassifier
from headwise.intent.kinds import TFIDF
from headwise.intent.prediction import check_texts
from headwise.models.io import write_json_atomically
from headwise.text.char_level import cjk_fraction

__all__ = ["TFIDF_FILE", "TfidfClassifier", "TfidfOneVsRest", "feature_vectorizers"]

#: the file that marks a saved TF-IDF classifier directory
TFIDF_FILE = TFIDF.marker  # "tfidf.json"
_WEIGHTS = "tfidf.safetensors"
#: TfidfVectorizer settings that are saved (all JSON values; the vocabulary and IDF
#: weights are saved beside them)
_SETTINGS = ("analyzer", "ngram_range", "sublinear_tf", "lowercase", "norm", "use_idf",
             "smooth_idf", "binary", "token_pattern", "strip_accents")


def feature_vectorizers(chinese: bool) -> list[Any]:
    """Unfitted scikit-learn ``TfidfVectorizer`` s whose outputs, side by side, are the
    features: character 1-3-grams for Chinese; word 1-2-grams and character 2-5-grams
    (within word boundaries) otherwise; sublinear term frequencies."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    if chinese:
        return [TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True)]
    return [TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True),
            TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True)]


class TfidfClassifier(CalibratedClassifier):
    """TF-IDF features and a linear layer, with the inference interface of
    :class:`~headwise.intent.classifier.IntentClassifier` (``labels``, ``temperature``,
    ``threshold``, ``logits``; ``predict_proba`` and ``predict`` from
    :class:`~headwise.intent.answering.CalibratedClassifier`; ``save``/``load``).

    Build one with :meth:`fit` (or ``headwise train --model tfidf``).

    Args:
        vectorizers: fitted ``TfidfVectorizer`` s (their outputs are concatenated).
        coef: (intents, features) weights.
        intercept: (intents,) biases.
        labels: intent names, index = class id.
        temperature: logits are divided by it before the softmax (calibration).
        threshold: calibrated top probability below which the answer is out-of-scope.
        info: free-form training summary saved with the model.

    Raises:
        ValueError: shapes that do not match each other, the labels or the features;
            duplicate labels; a non-positive temperature; a threshold outside [0, 1].
    """

    def __init__(self, vectorizers: Sequence[Any], coef: np.ndarray, intercept: np.ndarray,
                 labels: Sequence[str], *, temperature: float = 1.0, threshold: float = 0.0,
                 info: dict[str, Any] | None = None) -> None:
        self._set_calibration(labels, temperature, threshold, info)
        coef, intercept = np.asarray(coef, np.float64), np.asarray(intercept, np.float64)
        n, width = len(self.labels), sum(len(v.vocabulary_) for v in vectorizers)
        if coef.shape != (n, width) or intercept.shape != (n,):
            raise ValueError(f"coef {coef.shape} and intercept {intercept.shape} do not fit "
                             f"{n} intents and {width} features")
        self.vectorizers = list(vectorizers)
        # column-major, so that coef.T, the right operand of the sparse product in
        # logits, is C-contiguous: scipy copies (ravels) a dense operand that is not, which
        # cost a loaded model ~25 ms a query (two 64 MB copies on CIC), 40x the product
        self.coef, self.intercept = np.asfortranarray(coef), intercept

    @classmethod
    def fit(cls, texts: Sequence[str], labels: Sequence[str], *, c: float = 10.0,
            chinese: bool | None = None, class_weight: str | None = None,
            max_iter: int = 2000) -> TfidfClassifier:
        """Fit the features and the logistic regression on labelled texts.

        Args:
            texts: training texts.
            labels: their intents (at least two distinct).
            c: inverse L2 strength (scikit-learn's ``C``).
            chinese: Chinese features; None decides from the share of CJK characters.
            class_weight: None, or ``"balanced"`` (each intent weighted by
                ``n / (intents * count)``).
            max_iter: L-BFGS iterations at most.

        Raises:
            ValueError: fewer than two intents, mismatched lengths, ``c <= 0``.
        """
        from sklearn.linear_model import LogisticRegression

        texts, labels = check_texts(texts), [str(y) for y in labels]
        if len(texts) != len(labels):
            raise ValueError(f"{len(texts)} texts but {len(labels)} labels")
        if len(set(labels)) < 2:
            raise ValueError("a classifier needs at least two intents")
        if not c > 0:
            raise ValueError(f"c must be positive, got {c}")
        if chinese is None:
            chinese = cjk_fraction(texts[:2000]) > 0.3
        vectorizers = feature_vectorizers(chinese)
        x = sparse.hstack([v.fit_transform(texts) for v in vectorizers]).tocsr()
        lr = LogisticRegression(C=c, max_iter=max_iter, class_weight=class_weight).fit(x, labels)
        coef, intercept = lr.coef_, lr.intercept_
        if len(lr.classes_) == 2:  # one row w: P(second) = sigmoid(w.x + b) = softmax([0, w.x + b])
            coef = np.vstack([np.zeros_like(coef), coef])
            intercept = np.concatenate([np.zeros_like(intercept), intercept])
        return cls(vectorizers, coef, intercept, list(lr.classes_),
                   info={"chinese": chinese, "c": c, "class_weight": class_weight,
                         "iterations": int(np.max(lr.n_iter_))})

    def features(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """The (n, features) sparse TF-IDF matrix of ``texts``."""
        return _features(self.vectorizers, texts)

    def logits(self, texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
        """Raw (uncalibrated) logits (n, intents) as float64 (``batch_size`` is accepted
        for interface compatibility; the whole list is one sparse product).

        Raises:
            ValueError: an empty list; TypeError: a non-string item.
        """
        return np.asarray(self.features(texts) @ self.coef.T) + self.intercept

    # -- persistence -------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """Write ``tfidf.safetensors`` and then, atomically, ``tfidf.json`` into
        ``directory`` (created): a directory with ``tfidf.json`` is complete."""
        from headwise._files import follow_umask

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({"coef": np.ascontiguousarray(self.coef),
                   "intercept": np.ascontiguousarray(self.intercept)}, str(directory / _WEIGHTS))
        follow_umask(directory / _WEIGHTS)  # safetensors writes 0600
        write_json_atomically(directory / TFIDF_FILE, {
            "format": "headwise-tfidf", "version": 1, "labels": self.labels,
            "temperature": self.temperature, "threshold": self.threshold,
            "vectorizers": [_vectorizer_state(v) for v in self.vectorizers],
            "info": self.info})
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> TfidfClassifier:
        """Load a directory written by :meth:`save`.

        Raises:
            FileNotFoundError: no ``tfidf.json`` or no weights file.
            ValueError: an invalid ``tfidf.json``, or weights that do not fit it.
        """
        directory = Path(directory)
        path = directory / TFIDF_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{directory} has no {TFIDF_FILE}: not a saved TF-IDF "
                                    f"classifier")
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            vectorizers = [_vectorizer_from_state(spec) for spec in meta["vectorizers"]]
            labels = meta["labels"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ValueError(f"{path} is not a valid TF-IDF classifier file: {e}") from e
        if not (directory / _WEIGHTS).is_file():
            raise FileNotFoundError(f"{directory} has {TFIDF_FILE} but no {_WEIGHTS}")
        weights = load_file(str(directory / _WEIGHTS))
        return cls(vectorizers, weights["coef"], weights["intercept"], labels,
                   temperature=meta.get("temperature", 1.0),
                   threshold=meta.get("threshold", 0.0), info=meta.get("info"))

    def __repr__(self) -> str:
        width = sum(len(v.vocabulary_) for v in self.vectorizers)
        return (f"TfidfClassifier({width} features, {len(self.labels)} intents, "
                f"T={self.temperature:.3g}, threshold={self.threshold:.3g})")


#: the logit of an intent that every training row has (its negative: one that none has),
#: which a logistic regression cannot be fitted for: its probability is 1 (0) to float
#: precision, the constant scikit-learn's ``OneVsRestClassifier`` answers for it
_CONSTANT_LOGIT = 40.0


class TfidfOneVsRest:
    """TF-IDF features and one binary logistic regression per intent: the multi-label
    TF-IDF model, whose probabilities are a sigmoid per intent (not a softmax over them).

    It is the TF-IDF part of a compound model's blend (``levers.blend="tfidf"`` with the
    multi-label task, :func:`~headwise.intent.training.blending.blend_compound`); the
    features are :func:`feature_vectorizers`'. Build one with :meth:`fit`.

    Args:
        vectorizers: fitted ``TfidfVectorizer`` s (their outputs are concatenated).
        coef: (intents, features) weights.
        intercept: (intents,) biases.
        intents: intent names, index = row of ``coef``.
        info: free-form fit summary saved with the model.

    Raises:
        ValueError: shapes that do not match each other, the intents or the features;
            duplicate or no intents.
    """

    def __init__(self, vectorizers: Sequence[Any], coef: np.ndarray, intercept: np.ndarray,
                 intents: Sequence[str], *, info: dict[str, Any] | None = None) -> None:
        intents = [str(x) for x in intents]
        if not intents or len(set(intents)) != len(intents):
            raise ValueError(f"intents must be distinct and not empty, got {intents[:10]}")
        coef, intercept = np.asarray(coef, np.float64), np.asarray(intercept, np.float64)
        n, width = len(intents), sum(len(v.vocabulary_) for v in vectorizers)
        if coef.shape != (n, width) or intercept.shape != (n,):
            raise ValueError(f"coef {coef.shape} and intercept {intercept.shape} do not fit "
                             f"{n} intents and {width} features")
        self.vectorizers = list(vectorizers)
        self.coef, self.intercept = np.asfortranarray(coef), intercept  # as TfidfClassifier
        self.intents = intents
        self.info = dict(info or {})

    @classmethod
    def fit(cls, texts: Sequence[str], targets: np.ndarray, intents: Sequence[str], *,
            c: float = 10.0, chinese: bool | None = None, class_weight: str | None = None,
            max_iter: int = 2000) -> TfidfOneVsRest:
        """Fit the features and one logistic regression per intent (scikit-learn's
        ``OneVsRestClassifier`` of ``LogisticRegression``, L2, L-BFGS).

        Args:
            texts: training texts.
            targets: (texts, intents) 0/1 or bool: which intents each text has.
            intents: the intent of each column.
            c: inverse L2 strength (scikit-learn's ``C``).
            chinese: Chinese features; None decides from the share of CJK characters.
            class_weight: None, or ``"balanced"`` (each intent's positives weigh
                ``n / (2 * positives)`` and its negatives ``n / (2 * negatives)``).
            max_iter: L-BFGS iterations at most, per intent.

        An intent that every text has, or none, has no regression to fit: its probability
        is the constant (1 or 0) that ``OneVsRestClassifier`` answers for it.

        Raises:
            ValueError: targets that are not (texts, intents), ``c <= 0``, or no intent
                that some texts have and others do not.
        """
        from sklearn.linear_model import LogisticRegression
        from sklearn.multiclass import OneVsRestClassifier

        texts, intents = check_texts(texts), [str(x) for x in intents]
        y = np.asarray(targets)
        if y.shape != (len(texts), len(intents)):
            raise ValueError(f"targets must be ({len(texts)}, {len(intents)}) for the texts "
                             f"and intents, got {y.shape}")
        y = y.astype(bool)
        if not c > 0:
            raise ValueError(f"c must be positive, got {c}")
        varying = y.any(axis=0) & ~y.all(axis=0)
        if not varying.any():
            raise ValueError("no intent is on some texts and off others: nothing to fit")
        if chinese is None:
            chinese = cjk_fraction(texts[:2000]) > 0.3
        vectorizers = feature_vectorizers(chinese)
        x = sparse.hstack([v.fit_transform(texts) for v in vectorizers]).tocsr()
        ovr = OneVsRestClassifier(LogisticRegression(C=c, max_iter=max_iter,
                                                     class_weight=class_weight))
        fitted = y[:, varying].astype(int)
        # one intent to fit is a binary target: one regression whose positive class is 1
        ovr.fit(x, fitted if fitted.shape[1] > 1 else fitted[:, 0])
        coef = np.zeros((len(intents), x.shape[1]))
        intercept = np.where(y.all(axis=0), _CONSTANT_LOGIT, -_CONSTANT_LOGIT)
        for j, est in zip(np.flatnonzero(varying), ovr.estimators_, strict=True):
            coef[j], intercept[j] = est.coef_[0], est.intercept_[0]
        return cls(vectorizers, coef, intercept, intents,
                   info={"chinese": chinese, "c": c, "class_weight": class_weight,
                         "fitted_intents": int(varying.sum()),
                         "iterations": int(max(int(np.max(e.n_iter_))
                                               for e in ovr.estimators_))})

    def features(self, texts: Sequence[str]) -> sparse.csr_matrix:
        """The (n, features) sparse TF-IDF matrix of ``texts``."""
        return _features(self.vectorizers, texts)

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        """Each intent's logit (n, intents), float64.

        Raises:
            ValueError: an empty list; TypeError: a non-string item.
        """
        return np.asarray(self.features(texts) @ self.coef.T) + self.intercept

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Each intent's probability (n, intents), float64: the sigmoid of its logit (what
        the fitted ``OneVsRestClassifier``'s ``predict_proba`` gives)."""
        from scipy.special import expit

        return expit(self.logits(texts))

    # -- persistence -------------------------------------------------------------------
    def save(self, directory: str | Path, name: str) -> Path:
        """Write ``NAME.safetensors`` and then, atomically, ``NAME.json`` into
        ``directory`` (created); returns the JSON file's path."""
        from headwise._files import follow_umask

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        weights = directory / f"{name}.safetensors"
        save_file({"coef": np.ascontiguousarray(self.coef),
                   "intercept": np.ascontiguousarray(self.intercept)}, str(weights))
        follow_umask(weights)  # safetensors writes 0600
        path = directory / f"{name}.json"
        write_json_atomically(path, {
            "format": "headwise-tfidf-one-vs-rest", "version": 1, "intents": self.intents,
            "vectorizers": [_vectorizer_state(v) for v in self.vectorizers],
            "info": self.info})
        return path

    @classmethod
    def load(cls, directory: str | Path, name: str) -> TfidfOneVsRest:
        """Load ``NAME.json`` and ``NAME.safetensors`` written by :meth:`save`.

        Raises:
            FileNotFoundError: either file missing.
            ValueError: an invalid JSON file, or weights that do not fit it.
        """
        directory = Path(directory)
        path, weights = directory / f"{name}.json", directory / f"{name}.safetensors"
        for f in (path, weights):
            if not f.is_file():
                raise FileNotFoundError(f"{directory} has no {f.name}: the one-vs-rest TF-IDF "
                                        f"model is incomplete")
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            if meta.get("format") != "headwise-tfidf-one-vs-rest":
                raise ValueError(f"format {meta.get('format')!r}")
            vectorizers = [_vectorizer_from_state(spec) for spec in meta["vectorizers"]]
            intents = meta["intents"]
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as e:
            raise ValueError(f"{path} is not a valid one-vs-rest TF-IDF file: {e}") from e
        tensors = load_file(str(weights))
        return cls(vectorizers, tensors["coef"], tensors["intercept"], intents,
                   info=meta.get("info"))

    def __repr__(self) -> str:
        width = sum(len(v.vocabulary_) for v in self.vectorizers)
        return f"TfidfOneVsRest({width} features, {len(self.intents)} intents)"


# -- the features, shared by both models -----------------------------------------------------
def _features(vectorizers: Sequence[Any], texts: Sequence[str]) -> sparse.csr_matrix:
    """The vectorizers' outputs side by side: the (n, features) sparse matrix."""
    texts = check_texts(texts)
    return sparse.hstack([v.transform(texts) for v in vectorizers]).tocsr()


def _vectorizer_state(vectorizer: Any) -> dict[str, Any]:
    """A fitted ``TfidfVectorizer`` as JSON data: its settings, vocabulary and IDF weights."""
    return {"settings": {k: vectorizer.get_params()[k] for k in _SETTINGS},
            "vocabulary": {t: int(i) for t, i in vectorizer.vocabulary_.items()},
            "idf": vectorizer.idf_.tolist()}


def _vectorizer_from_state(spec: dict[str, Any]) -> Any:
    """The fitted ``TfidfVectorizer`` that :func:`_vectorizer_state` wrote."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    settings = dict(spec["settings"])
    settings["ngram_range"] = tuple(settings["ngram_range"])
    v = TfidfVectorizer(**settings, vocabulary=spec["vocabulary"])
    v.idf_ = np.asarray(spec["idf"], np.float64)
    return v
