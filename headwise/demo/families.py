"""Template families of the demo corpus and their assignment to splits.

A *family* is one way of phrasing a request; every template belongs to exactly one, and a
whole family goes to one split (train, valid or test), so no valid or test question shares
a template, or a phrasing family, with a training question. The families:

* ``<intent>.<k>``: the intent's own families (:data:`~headwise.demo.templates.
  INTENT_FAMILIES`); ``<intent>.0`` is its *core*, the plainest ways to say the request
  (我的信用卡丢了), which always goes to training: holding out phrasing must not hold out
  meaning;
* ``contrast.<k>`` / ``correction.<k>``: one contrast or correction frame, filled in for
  every intent that uses it (the frame goes to one split for all of them);
* ``pair.<k>``: one minimal-pair template (both of its texts, both labels);
* ``oos.<k>`` / ``oos_near.<k>``: one out-of-scope template, far or near miss (valid or
  test only);
* ``oos_train.<k>`` / ``oos_near_train.<k>``: one out-of-scope template written for
  training rows (``generate_demo_corpus(oos_train=N)``), always in train, so that valid
  and test keep out-of-scope phrasing no training row has.

A template's id is ``<family>:<n>``. :func:`assign_families` shuffles each group of families
(an intent's own, the contrast frames, the correction frames, each minimal-pair family, the
out-of-scope ones) with the corpus's random source: in each group one family goes to test,
one to valid and the rest to train (out-of-scope families alternate between valid and test);
an intent's core family is not shuffled, it goes to train, and neither are the training
out-of-scope families (:data:`TRAIN_OOS_GROUPS`): they draw nothing from the random source,
so valid and test are what they were before those families existed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from headwise.demo.lexicon import (
    OOS_NEAR_MISS_TEMPLATES,
    OOS_NEAR_MISS_TRAIN_TEMPLATES,
    OOS_TEMPLATES,
    OOS_TRAIN_TEMPLATES,
    PAIR_TEMPLATES,
)
from headwise.demo.render import frame_templates
from headwise.demo.templates import INTENT_FAMILIES

SPLITS = ("train", "valid", "test")
#: the groups of out-of-scope families written for training rows: always in train
TRAIN_OOS_GROUPS = ("oos_train", "oos_near_train")


@dataclass(frozen=True)
class Template:
    """One template of the corpus.

    Attributes:
        id: ``<family>:<n>``, unique.
        family: the family the template belongs to.
        group: the families assigned together (``own:<intent>``, ``contrast``, ``pair:...``).
        intent: the label of its texts (for a minimal pair: of the side without the
            negation; ``oos`` for out-of-scope ones).
        template: the template text.
        negated: the label of a minimal pair's side with the negation, else None.
        near_miss: an out-of-scope request that sounds like banking.
        core: one of an intent's core wordings (its family always goes to training).
    """

    id: str
    family: str
    group: str
    intent: str
    template: str
    negated: str | None = None
    near_miss: bool = False
    core: bool = False


def family_of(template_id: str) -> str:
    """The family of a template id (``apply_instalment.3:1`` -> ``apply_instalment.3``)."""
    return template_id.rpartition(":")[0] or template_id


def catalogue() -> list[Template]:
    """Every template of the corpus, in a fixed order."""
    out: list[Template] = []
    for intent, families in INTENT_FAMILIES.items():
        for k, family in enumerate(families):
            out += [Template(f"{intent}.{k}:{n}", f"{intent}.{k}", f"own:{intent}", intent, t,
                             core=k == 0)
                    for n, t in enumerate(family)]
    seen: dict[str, int] = {}
    for kind, k, intent, template in frame_templates():
        family = f"{kind}.{k}"
        n = seen[family] = seen.get(family, -1) + 1
        out.append(Template(f"{family}:{n}", family, kind, intent, template))
    for k, (pos, neg, template) in enumerate(PAIR_TEMPLATES):
        out.append(Template(f"pair.{k}:0", f"pair.{k}", f"pair:{pos}/{neg}", pos, template,
                            negated=neg))
    for name, templates, near in (("oos", OOS_TEMPLATES, False),
                                  ("oos_near", OOS_NEAR_MISS_TEMPLATES, True),
                                  ("oos_train", OOS_TRAIN_TEMPLATES, False),
                                  ("oos_near_train", OOS_NEAR_MISS_TRAIN_TEMPLATES, True)):
        out += [Template(f"{name}.{k}:0", f"{name}.{k}", name, "oos", t, near_miss=near)
                for k, t in enumerate(templates)]
    return out


def assign_families(templates: list[Template], rng: random.Random) -> dict[str, str]:
    """Family -> split (``train``, ``valid``, ``test``), deterministic for the ``rng`` state.

    A core family (:attr:`Template.core`) and a family of :data:`TRAIN_OOS_GROUPS` go to
    train, drawing nothing. Of the other families of each group, one goes to test, one to
    valid, the rest to train; out-of-scope groups alternate valid, test. A group of one or
    two such families keeps its first ones for test and valid, so a small group may have no
    training family but its core.
    """
    groups: dict[str, list[str]] = {}
    split: dict[str, str] = {}
    for t in templates:
        if t.core or t.group in TRAIN_OOS_GROUPS:
            split[t.family] = "train"
            continue
        families = groups.setdefault(t.group, [])
        if t.family not in families:
            families.append(t.family)
    for group, families in groups.items():
        order = list(families)
        rng.shuffle(order)
        for i, family in enumerate(order):
            if group in ("oos", "oos_near"):
                split[family] = ("valid", "test")[i % 2]
            else:
                split[family] = ("test", "valid")[i] if i < 2 else "train"
    return split
