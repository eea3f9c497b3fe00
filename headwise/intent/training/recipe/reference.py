"""The recipe's reference, generated from the code: every part's fields with their type,
default and what they do (the first sentence of each field's docstring entry).
``docs/recipe.md`` holds :func:`recipe_table`, and a test checks that it is this table;
``headwise train --help`` words its options with :func:`field_docs` and
:func:`first_sentence`."""

from __future__ import annotations

import dataclasses
import json
import re
import typing
from typing import Any

from headwise.intent.training.recipe import (
    ARCHITECTURES,
    TASKS,
    Decision,
    IntentRecipe,
    Levers,
    Transformer,
    default_train,
    describe_hint,
)
from headwise.train.config import TrainConfig

__all__ = ["field_docs", "first_sentence", "recipe_table"]


def field_docs(cls_: type) -> dict[str, str]:
    """Each field's entry in a dataclass's ``Attributes:`` (or ``Args:``) docstring section,
    its lines joined."""
    doc = cls_.__doc__ or ""
    section = re.split(r"\n\s*(?:Attributes|Args):\n", doc, maxsplit=1)
    if len(section) < 2:
        return {}
    body = re.split(r"\n\s*(?:Raises|Returns):\n", section[1], maxsplit=1)[0]
    entries: dict[str, str] = {}
    name = None
    for line in body.splitlines():
        head = re.match(r"^ {8}(\w+):\s*(.*)$", line)
        if head:
            name = head.group(1)
            entries[name] = head.group(2)
        elif name and line.strip():
            entries[name] += " " + line.strip()
    return entries


def first_sentence(text: str) -> str:
    """``text`` up to its first ``. `` or ``; `` outside parentheses and code."""
    depth, code = 0, False
    for i, ch in enumerate(text):
        if text.startswith("``", i):
            code = not code
        elif not code and ch in "([":
            depth += 1
        elif not code and ch in ")]":
            depth = max(depth - 1, 0)
        elif not code and depth == 0 and ch in ".;" and text[i + 1:i + 2] in (" ", ""):
            return text[:i + 1] if ch == "." else text[:i]
    return text


def recipe_table() -> str:
    """Every part's fields as a Markdown table: part, field, type, default and what it does
    (the first sentence of the field's docstring entry). docs/recipe.md holds it, and a test
    checks that it is this table. ``train`` lists the TrainConfig fields a recipe is
    expected to set, at the recipe's defaults (the transformer's ``lr`` / ``epochs``)."""
    rows = ["| part | field | type | default | what it does |", "| --- | --- | --- | --- | --- |"]
    train_shown = ("lr", "epochs", "batch_size", "weight_decay", "warmup_ratio", "schedule",
                   "patience", "seed", "progress", "max_grad_norm", "precision", "device")
    groups: list[tuple[str, type, Any, tuple[str, ...] | None]] = [
        *((f"architecture ({c.NAME})", c, None, None) for c in ARCHITECTURES.values()),
        ("train (TrainConfig)", TrainConfig, default_train(Transformer()), train_shown),
        ("levers", Levers, None, None), ("decision", Decision, None, None),
        *((f"task ({c.NAME})", c, None, None) for c in TASKS.values())]
    for label, cls_, instance, shown in groups:
        docs = field_docs(cls_)
        hints = typing.get_type_hints(cls_)
        for f in dataclasses.fields(cls_):
            if shown is not None and f.name not in shown:
                continue
            if instance is not None:
                default = getattr(instance, f.name)
            elif f.default is not dataclasses.MISSING:
                default = f.default
            else:
                default = f.default_factory()  # type: ignore[misc]
            text = re.sub(r":(?:class|func|data|mod|meth):`~?([^`]+)`",
                          lambda m: "``" + m.group(1).rsplit(".", 1)[-1].strip() + "``",
                          docs.get(f.name, ""))
            what = first_sentence(text).replace("``", "`").replace("|", "\\|")
            typed = describe_hint(hints[f.name]).replace("|", "\\|")
            rows.append(f"| {label} | `{f.name}` | {typed} | "
                        f"`{json.dumps(default, ensure_ascii=False)}` | {what} |")
    rows.append("| (recipe) | `valid_fraction` | a number | `0.1` | "
                + first_sentence(field_docs(IntentRecipe)["valid_fraction"]) + " |")
    return "\n".join(rows)
