"""The deprecation path of the modules that the regroups moved: ``headwise.intent``'s into
its subpackages (``decision/``, ``training/``, ``compound/``), and the demo corpus
generator, the demo runners and the attention tour into ``headwise.demo``, and slot-value
normalisation (``headwise.text.values``) into ``headwise.slots``. ``import
headwise.intent.recipe`` keeps working, gives the module at its new place (the same module
object, so monkeypatching either name patches both) and warns once with
:class:`DeprecationWarning` naming the new path. CHANGELOG.md lists the moves.

A meta path finder answers for the old names only; every other import is left to the
normal machinery. It is installed by ``headwise/__init__.py``, so that it is in place
before any subpackage is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

#: old module (or package, with everything under it) -> its new place
MOVED: dict[str, str] = {
    "headwise.intent.calibration": "headwise.intent.decision.temperature",
    "headwise.intent.recalibration": "headwise.intent.decision.recalibration",
    "headwise.intent.oos": "headwise.intent.decision.oos",
    "headwise.intent.prior": "headwise.intent.decision.prior",
    "headwise.intent.ood": "headwise.intent.decision.ood",
    "headwise.intent.recipe": "headwise.intent.training.recipe",
    "headwise.intent.recipe_paths": "headwise.intent.training.recipe_paths",
    "headwise.intent.recipe_fields": "headwise.intent.training.recipe_fields",
    "headwise.intent.builders": "headwise.intent.training.builders",
    "headwise.intent.objective": "headwise.intent.training.losses",
    "headwise.intent.examples": "headwise.intent.training.data",
    "headwise.intent.linear_probe": "headwise.intent.training.linear_probe",
    "headwise.intent.pretrain": "headwise.intent.training.pretrain",
    "headwise.intent.cleaning": "headwise.intent.training.cleaning",
    "headwise.intent.distillation": "headwise.intent.training.distillation",
    "headwise.intent.trimming": "headwise.intent.training.trimming",
    "headwise.intent.blending": "headwise.intent.training.blending",
    "headwise.intent.tfidf_selection": "headwise.intent.training.tfidf_selection",
    "headwise.intent.compound_recipe": "headwise.intent.compound.training",
    "headwise.intent.compound_eval": "headwise.intent.compound.evaluation",
    "headwise.intent.multilabel": "headwise.intent.compound.thresholds",
    "headwise.text.demo_corpus": "headwise.demo.corpus",
    "headwise.text.demo_families": "headwise.demo.families",
    "headwise.text.demo_lexicon": "headwise.demo.lexicon",
    "headwise.text.demo_phenomena": "headwise.demo.phenomena",
    "headwise.text.demo_render": "headwise.demo.render",
    "headwise.text.demo_templates": "headwise.demo.templates",
    "headwise.text.demo_values": "headwise.demo.values",
    "headwise.intent.demo": "headwise.demo.runner",
    "headwise.intent.demo_compound": "headwise.demo.compound",
    "headwise.showcase": "headwise.demo.showcase",
    "headwise.text.values.slots": "headwise.slots.slot_values",  # before its package
    "headwise.text.values": "headwise.slots",
}


def new_name(fullname: str) -> str | None:
    """Where the module once called ``fullname`` lives now (None: it did not move)."""
    for old, new in MOVED.items():
        if fullname == old or fullname.startswith(old + "."):
            return new + fullname[len(old):]
    return None


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module at its new place."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} moved to {self.new}; import it from there (the old name "
                      f"goes in a later release)", DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        sys.modules[self.old] = module  # already executed at its new name


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None
                  ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(fullname, new))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once): an old name's submodule
    (``headwise.intent.ood.knn``) must come from it too, not be found a second time, as a
    second module, in the moved package's folder."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
