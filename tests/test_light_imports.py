"""Loading a saved classifier, or using the tokenizer, imports no library it does not need
(the start-up of `headwise predict` is the model's, not scikit-learn's or matplotlib's)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("sklearn", "scipy.linalg", "scipy.stats", "matplotlib", "cleanlab", "pandas",
         "transformers", "onnxruntime")


@pytest.mark.parametrize("statement", [
    "from headwise.intent.kinds import load_classifier",
    "from headwise.intent.ensemble import EnsembleClassifier",
    "from headwise.intent import IntentClassifier",
    "from headwise.text import Tokenizer",
    "import headwise.commands.predict",
    "from headwise.intent.compound.classifier import CompoundClassifier",
    "from headwise.intent.inference.compound import CompoundPredictor",
])
def test_the_predict_path_imports_no_heavy_library(statement):
    code = f"import sys\n{statement}\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", f"{statement} imported {out}"


def test_lazy_package_names_resolve_to_their_modules():
    import headwise.intent as intent
    import headwise.intent.batch as batch
    import headwise.intent.compound as compound
    import headwise.intent.inference as inference
    import headwise.text as text

    for package in (intent, batch, compound, inference, text):
        assert sorted(package.__all__) == sorted(package._LAZY)
        for name in package.__all__:
            value = getattr(package, name)
            assert getattr(__import__(package._LAZY[name], fromlist=[name]), name) is value
        assert set(package.__all__) <= set(dir(package))
        with pytest.raises(AttributeError, match="no attribute 'nope'"):
            package.nope  # noqa: B018


def test_the_text_layer_loads_no_demo_module():
    code = ("import sys, headwise.text.tokenizer, headwise.text.readers, "
            "headwise.intent.evaluation, headwise.inspect.categories, "
            "headwise.intent.training.distillation; "
            "bad = sorted(m for m in sys.modules if m.startswith('headwise.demo')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
