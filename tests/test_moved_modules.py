"""The regroups' deprecation path (headwise._moved): every old module name still imports,
as the very module at its new place, with a DeprecationWarning naming it; the demo names
that headwise.text exported resolve the same way."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from headwise._moved import MOVED, new_name


@pytest.mark.parametrize("old", sorted(MOVED))
def test_each_old_name_is_the_new_module_and_warns(old):
    new = importlib.import_module(MOVED[old])
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {MOVED[old]}"):
        module = importlib.import_module(old)
    assert module is new


def test_submodules_of_a_moved_package_are_not_loaded_twice():
    code = ("import warnings; warnings.simplefilter('ignore'); "
            "import headwise.intent.ood.knn as a, headwise.intent.decision.ood.knn as b; "
            "from headwise.intent.ood import make_detector as m; "
            "from headwise.intent.decision.ood import make_detector as n; "
            "assert a is b and m is n, (a, b)")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_new_names_and_packages():
    assert new_name("headwise.intent.ood.knn") == "headwise.intent.decision.ood.knn"
    assert new_name("headwise.intent.oosx") is None and new_name("headwise.intent") is None
    from headwise.intent.compound import CompoundClassifier, decide  # the old module's names
    from headwise.intent.compound.classifier import CompoundClassifier as C
    from headwise.intent.compound.thresholds import decide as d

    assert CompoundClassifier is C and decide is d
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        import headwise.intent.compound as pkg

        pkg.nothing  # noqa: B018


@pytest.mark.parametrize("name", ["generate_demo_corpus", "DemoExample", "DEMO_INTENTS",
                                  "read_demo_jsonl", "write_demo_corpus", "Slot", "Span"])
def test_the_demo_names_headwise_text_exported_warn_and_resolve(name):
    import headwise.demo
    import headwise.text

    with pytest.warns(DeprecationWarning, match=f"headwise.text.{name} moved to "
                                                f"headwise.demo.corpus.{name}"):
        value = getattr(headwise.text, name)
    assert value is getattr(headwise.demo, name)
    assert name not in dir(headwise.text) and name not in headwise.text.__all__


@pytest.mark.parametrize("name,module", [
    ("train_intent_classifier", "pipeline"), ("TrainedIntent", "pipeline"),
    ("build_intent_model", "builders"), ("train_config", "builders"),
    ("load_pretrained_for_task", "builders"), ("run_tokenizer", "builders")])
def test_the_names_the_recipe_module_exported_warn_and_resolve(name, module):
    import importlib

    import headwise.intent.training.recipe as recipe

    new = importlib.import_module(f"headwise.intent.training.{module}")
    with pytest.warns(DeprecationWarning, match=f"recipe.{name} moved to "
                                                f"headwise.intent.training.{module}.{name}"):
        value = getattr(recipe, name)
    assert value is getattr(new, name)
    assert name not in dir(recipe) and name not in recipe.__all__


def test_the_text_layer_loads_no_demo_module():
    code = ("import sys, headwise.text.tokenizer, headwise.text.readers, "
            "headwise.intent.evaluation, headwise.inspect.categories, "
            "headwise.intent.training.distillation; "
            "bad = sorted(m for m in sys.modules if m.startswith('headwise.demo')); "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_answering_names_are_the_same_from_their_old_module():
    import headwise.intent.answering as answering
    import headwise.intent.classifier as classifier

    for name in answering.__all__:
        assert getattr(classifier, name) is getattr(answering, name), name
        assert name in classifier.__all__
