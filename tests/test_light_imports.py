"""Loading a saved classifier, or using the tokenizer, imports no library it does not need
(the start-up of `headwise predict` is the model's, not scikit-learn's or matplotlib's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HEAVY = ("sklearn", "scipy.linalg", "scipy.stats", "matplotlib", "cleanlab", "pandas",
         "transformers", "onnxruntime")


PREDICT_PATH = [
    "from headwise.intent.kinds import load_classifier",
    "from headwise.intent.ensemble import EnsembleClassifier",
    "from headwise.intent import IntentClassifier",
    "from headwise.text import Tokenizer",
    "import headwise.commands.predict",
    "from headwise.intent.compound.classifier import CompoundClassifier",
    "from headwise.intent.inference.compound import CompoundPredictor",
]

#: each statement runs in a child forked from one fresh interpreter that has imported
#: PyTorch (which is not heavy here: the predict path needs it) and nothing of headwise,
#: so every statement starts from the same clean state without paying PyTorch's import
#: once per statement; the parent also shows that PyTorch brings no heavy library along
FORKED = """
import json, os, sys
import torch
heavy, statements = json.loads(sys.argv[1]), json.loads(sys.argv[2])
report = {"torch": sorted(m for m in heavy if m in sys.modules), "imported": {}}
for statement in statements:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            exec(statement, {})
            out = sorted(m for m in heavy if m in sys.modules)
        except BaseException as e:
            out = f"{type(e).__name__}: {e}"
        os.write(write, json.dumps(out).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    report["imported"][statement] = json.loads(answer)
print(json.dumps(report))
"""


@pytest.fixture(scope="module")
def predict_path_imports() -> dict[str, list[str] | str]:
    """Each of :data:`PREDICT_PATH` -> the heavy modules loaded after it (or its error)."""
    out = subprocess.run([sys.executable, "-c", FORKED, json.dumps(HEAVY),
                          json.dumps(PREDICT_PATH)], capture_output=True, text=True,
                         check=True).stdout.strip()
    report = json.loads(out.splitlines()[-1])
    assert report["torch"] == [], f"importing torch loaded {report['torch']}"
    return report["imported"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the check forks one interpreter")
@pytest.mark.parametrize("statement", PREDICT_PATH)
def test_the_predict_path_imports_no_heavy_library(statement, predict_path_imports):
    assert predict_path_imports[statement] == [], \
        f"{statement} imported {predict_path_imports[statement]}"


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
