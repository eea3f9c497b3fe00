"""The recipe of an intent classifier, shaped like what it builds.

An :class:`IntentRecipe` is five parts and one number:

* ``architecture``: one of :class:`Transformer` (from scratch), :class:`BiLSTM` (the
  baseline), :class:`PretrainedEncoder` (an imported checkpoint with a fresh head) or
  :class:`Tfidf` (TF-IDF features and a logistic regression, no network); each part owns
  the fields of its architecture, so a field another architecture reads cannot be written;
* ``train``: the Trainer's own :class:`~headwise.train.TrainConfig`;
* ``levers``: the loss and what may be added around training (:class:`Levers`);
* ``decision``: how answers are decided once trained (:class:`Decision`);
* ``task``: :class:`SingleLabel`, or :class:`MultiLabel` (several intents per text and slots);
* ``valid_fraction``: held out of the training data when no validation data is given.

Each part checks its own fields (type and range) when built, and the recipe checks once
what the parts mean together (a lever the architecture or the task cannot use), every
message naming the field by its path (``levers.pretrain_epochs``). A ``--config`` file is
the recipe's :meth:`IntentRecipe.to_dict`::

    {"architecture": {"type": "transformer", "d_model": 128, "num_layers": 2},
     "train": {"epochs": 10, "lr": 0.001},
     "levers": {"linear_probe": true},
     "decision": {"ood_detector": "energy"},
     "task": {"type": "single_label"}}

The package holds one part a module (:mod:`.architectures`, :mod:`.levers`, :mod:`.decision`,
:mod:`.tasks`), the field checks they share (:mod:`.fields`), the recipe whole
(:mod:`.intent_recipe`) and its reference generated from the code (:mod:`.reference`).
Training a recipe is :func:`~headwise.intent.training.pipeline.train_intent_classifier`'s;
what it builds is :mod:`headwise.intent.training.builders`'.
"""

from headwise.intent.training.recipe.architectures import (
    ARCHITECTURES,
    BiLSTM,
    PretrainedEncoder,
    Tfidf,
    Transformer,
    architecture_from_spec,
)
from headwise.intent.training.recipe.decision import Decision
from headwise.intent.training.recipe.fields import describe_hint
from headwise.intent.training.recipe.intent_recipe import (
    FAMILY_FIELDS,
    PARTS,
    IntentRecipe,
    default_train,
)
from headwise.intent.training.recipe.levers import Levers
from headwise.intent.training.recipe.tasks import TASKS, MultiLabel, SingleLabel

__all__ = ["ARCHITECTURES", "FAMILY_FIELDS", "PARTS", "TASKS", "BiLSTM", "Decision",
           "IntentRecipe", "Levers",
           "MultiLabel", "PretrainedEncoder", "SingleLabel", "Tfidf", "Transformer",
           "architecture_from_spec", "default_train", "describe_hint"]
