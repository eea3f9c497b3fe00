"""The registry of saved classifier kinds: which file marks each kind's directory, the
``"format"`` that file declares, the class that loads it, and what the kind can do.

Every saved classifier directory holds one metadata file that names its kind: a network
(``intent.json``, also what a soup saves), a TF-IDF model (``tfidf.json``), an ensemble
(``ensemble.json``) or a compound multi-label classifier (``compound.json``). This module
is the only place that decides a directory's kind from those files (:func:`kind_of`), and
it holds the only loader (:func:`load_classifier`; :func:`load_single_label` refuses the
multi-label kinds). Commands, the service and the integrations ask a kind what it can do
(:meth:`ModelKind.supports`, :meth:`ModelKind.require`) instead of testing for files or
classes; a kind that cannot do something says why, in the registry, once.

A new kind is one :func:`register_kind` call: its class needs ``load(directory)`` and
``save(directory)``, and a single-label kind the
:class:`~headwise.intent.answering.ProbabilityClassifier` interface (``labels``,
``threshold``, ``info``, ``predict_proba``); ``headwise predict``, ``eval``, ``calibrate``
and ``serve`` then take it with no other change.

The module imports nothing heavy (classes are named as ``"module:Class"`` and imported on
first use), so the command line asks it about a directory without loading PyTorch.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

__all__ = ["CAPABILITIES", "COMPOUND", "ENSEMBLE", "NETWORK", "TFIDF", "ModelKind",
           "is_multi_label", "kind_of", "kind_of_classifier", "load_classifier",
           "load_single_label", "metadata_path", "register_kind", "registered_kinds",
           "unregister_kind"]

#: what a kind may be able to do, and how a message names it
CAPABILITIES: Mapping[str, str] = MappingProxyType({
    "onnx": "ONNX export (`headwise export`, the onnx runtime of `headwise serve`)",
    "chunk": "long-text policies that read past the first window (`--set long_text=chunk`, "
             "`head_tail`, `chunk_max`, `chunk_in_scope` or `chunk_span`, and their "
             "windows' width, "
             "`chunk_length`)",
    "reject": "long-text policy reject (`headwise serve --set long_text=reject`)",
    "explain": "token attribution (`headwise explain`, `/v1/explain`)",
    "heads": "attention heads to analyse (`headwise inspect`)",
    "soup": "weight averaging (`headwise soup`)",
    "calibrate": "recalibration (`headwise calibrate`)",
    "teacher": "a teacher's probabilities (`headwise distill`)",
})


@dataclass(frozen=True)
class ModelKind:
    """One kind of saved classifier.

    Attributes:
        name: short name (``"network"``, ``"tfidf"``, ...), also the service's runtime
            name for kinds served by their own ``predict_proba``.
        marker: the metadata file that marks a directory of this kind.
        format: the ``"format"`` value that file holds.
        loader: ``"module:Class"``: the class whose ``load(directory)`` reads it.
        description: how a message names one (``"a TF-IDF model"``).
        multi_label: several intents per text and slots (the compound path of ``predict``,
            ``eval`` and ``serve``).
        missing: the capabilities of :data:`CAPABILITIES` it lacks, each with the reason.
    """

    name: str
    marker: str
    format: str
    loader: str
    description: str
    multi_label: bool = False
    missing: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.missing) - set(CAPABILITIES))
        if unknown:
            raise ValueError(f"kind {self.name!r}: unknown capabilities {unknown}; known: "
                             f"{sorted(CAPABILITIES)}")
        if ":" not in self.loader:
            raise ValueError(f"kind {self.name!r}: loader must be 'module:Class', got "
                             f"{self.loader!r}")

    def load_class(self) -> type:
        """The class that loads this kind (imported now)."""
        module, _, name = self.loader.partition(":")
        return getattr(importlib.import_module(module), name)

    def load(self, directory: str | Path) -> Any:
        """The classifier saved in ``directory``."""
        return self.load_class().load(directory)

    def supports(self, capability: str) -> bool:
        """Whether this kind has ``capability`` (a key of :data:`CAPABILITIES`).

        Raises:
            KeyError: an unknown capability.
        """
        if capability not in CAPABILITIES:
            raise KeyError(f"unknown capability {capability!r}; known: {sorted(CAPABILITIES)}")
        return capability not in self.missing

    def require(self, capability: str, where: str | Path = "the model") -> None:
        """Refuse, in words, what this kind cannot do.

        Raises:
            ValueError: ``"{where} is {description}, which has no {capability}: {why}"``.
        """
        if not self.supports(capability):
            raise ValueError(f"{where} is {self.description}, which has no "
                             f"{CAPABILITIES[capability]}: {self.missing[capability]}")


_SERVE_AS_IS = "`headwise serve` serves it as it is"
NETWORK = ModelKind(
    "network", "intent.json", "headwise-intent", "headwise.intent.classifier:IntentClassifier",
    "an intent classifier")
TFIDF = ModelKind(
    "tfidf", "tfidf.json", "headwise-tfidf", "headwise.intent.tfidf:TfidfClassifier",
    "a TF-IDF classifier", missing={
        "onnx": f"there is no network to export (Transformer classifiers only); {_SERVE_AS_IS}",
        "chunk": "it needs a single network (a TF-IDF model reads the whole text); use "
                 "truncate",
        "reject": "it needs a single network (a TF-IDF model reads the whole text); use "
                  "truncate",
        "heads": "a linear model on n-grams has no attention heads",
        "soup": "a soup averages the weights of networks fine-tuned from one checkpoint"})
ENSEMBLE = ModelKind(
    "ensemble", "ensemble.json", "headwise-ensemble", "headwise.intent.ensemble:"
    "EnsembleClassifier", "an ensemble", missing={
        "onnx": f"each member runs on its own path (Transformer classifiers only); "
                f"{_SERVE_AS_IS}",
        "chunk": "it needs a single network (an ensemble's networks truncate each text); "
                 "use truncate",
        "reject": "it needs a single network (an ensemble's networks truncate each text); "
                  "use truncate",
        "explain": "its members' attributions are not one model's; explain a member",
        "heads": "its members' heads are not one model's; inspect a member",
        "soup": "list its members instead"})
COMPOUND = ModelKind(
    "compound", "compound.json", "headwise-compound", "headwise.intent.compound.classifier:"
    "CompoundClassifier", "a compound (multi-label + slots) classifier", multi_label=True,
    missing={
        "chunk": "slot spans are read on the text's first window only; use truncate or "
                 "reject",
        "calibrate": "its per-intent thresholds are tuned by `headwise train --valid`"})

#: name -> kind; the order is the order markers are looked for in a directory
_KINDS: dict[str, ModelKind] = {k.name: k for k in (COMPOUND, ENSEMBLE, TFIDF, NETWORK)}
_BUILTIN = frozenset(_KINDS)


def register_kind(kind: ModelKind, *, replace: bool = False) -> ModelKind:
    """Add a kind to the registry (looked for before the built-in ones).

    Args:
        kind: the :class:`ModelKind`.
        replace: replace a registered kind of the same name.

    Returns:
        ``kind``.

    Raises:
        ValueError: a name already registered (without ``replace``), a built-in name, or a
            marker file or format another kind uses.
    """
    if kind.name in _BUILTIN:
        raise ValueError(f"{kind.name!r} is a built-in kind and cannot be replaced")
    if kind.name in _KINDS and not replace:
        raise ValueError(f"a kind named {kind.name!r} is already registered; pass "
                         f"replace=True to replace it")
    for other in _KINDS.values():
        if other.name != kind.name and (other.marker == kind.marker
                                        or other.format == kind.format):
            raise ValueError(f"kind {kind.name!r}: marker {kind.marker!r} / format "
                             f"{kind.format!r} is already kind {other.name!r}'s")
    rest = [(n, k) for n, k in _KINDS.items() if n != kind.name]
    _KINDS.clear()
    _KINDS.update([(kind.name, kind), *rest])
    return kind


def unregister_kind(name: str) -> None:
    """Remove a kind added by :func:`register_kind`.

    Raises:
        ValueError: a built-in kind. KeyError: no such kind.
    """
    if name in _BUILTIN:
        raise ValueError(f"{name!r} is a built-in kind and cannot be removed")
    del _KINDS[name]


def registered_kinds() -> list[ModelKind]:
    """Every registered kind, in the order their markers are looked for."""
    return list(_KINDS.values())


def kind_of(directory: str | Path) -> ModelKind:
    """The kind of the classifier saved in ``directory``: the first kind whose marker file
    is there; its ``"format"``, when the file names one, must be the kind's.

    Raises:
        FileNotFoundError: no such directory, or none of the markers in it (the message
            lists them).
        ValueError: a marker file that is not JSON or names another format.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no model directory at {directory}")
    for kind in _KINDS.values():
        path = directory / kind.marker
        if not path.is_file():
            continue
        try:
            declared = json.loads(path.read_text(encoding="utf-8")).get("format")
        except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path} is not a valid metadata file: {e}") from e
        if declared is not None and declared != kind.format:
            raise ValueError(f"{path} declares format {declared!r}, not {kind.format!r} "
                             f"({kind.description}): the file is damaged or not headwise's")
        return kind
    order = [NETWORK, *(k for k in _KINDS.values() if k is not NETWORK)]
    listed = ", ".join(f"{k.marker} ({k.description})" for k in order)
    raise FileNotFoundError(f"{directory} holds no saved classifier: it holds none of "
                            f"{listed}; it is not a model saved by headwise (or the save was "
                            f"interrupted)")


def kind_of_classifier(classifier: Any) -> ModelKind:
    """The registered kind of a loaded classifier: the one whose class it is, else the first
    whose class it is an instance of.

    Raises:
        TypeError: an object of no registered kind.
    """
    kinds = list(_KINDS.values())
    for kind in kinds:  # exact class first: a subclass may be its own kind
        module, _, name = kind.loader.partition(":")
        if type(classifier).__module__ == module and type(classifier).__name__ == name:
            return kind
    for kind in kinds:
        if isinstance(classifier, kind.load_class()):
            return kind
    raise TypeError(f"{type(classifier).__name__} is no registered classifier kind")


def load_classifier(directory: str | Path) -> Any:
    """Whatever classifier ``directory`` holds, loaded by its kind's class.

    Raises:
        FileNotFoundError, ValueError: as :func:`kind_of` and the kind's ``load``.
    """
    return kind_of(directory).load(directory)


def load_single_label(directory: str | Path, purpose: str | None = None) -> Any:
    """The single-label classifier ``directory`` holds (a network, a TF-IDF model, an
    ensemble, or a registered kind of that interface).

    Args:
        directory: the saved classifier.
        purpose: the capability asked for (a key of :data:`CAPABILITIES`, e.g.
            ``"teacher"``), refused in words when the kind lacks it.

    Raises:
        ValueError: a multi-label kind, or one without ``purpose``.
        FileNotFoundError: as :func:`kind_of`.
    """
    kind = kind_of(directory)
    if purpose is not None:
        kind.require(purpose, directory)
    if kind.multi_label:
        raise ValueError(f"{directory} is {kind.description}; this needs a single-label "
                         f"classifier")
    return kind.load(directory)


def is_multi_label(directory: str | Path) -> bool:
    """Whether ``directory`` holds a multi-label kind (False when it holds no classifier:
    the loader then says what is wrong)."""
    try:
        return kind_of(directory).multi_label
    except (FileNotFoundError, ValueError):
        return False


def metadata_path(directory: str | Path) -> Path:
    """The metadata file of the classifier saved in ``directory`` (its kind's marker).

    Raises:
        FileNotFoundError, ValueError: as :func:`kind_of`.
    """
    return Path(directory) / kind_of(directory).marker
