"""Rendering the demo corpus's templates into annotated utterances.

A template (notation in :mod:`headwise.demo.lexicon`) becomes one customer message:
the body with its alternatives picked and its slot values written out, and the final
punctuation typed one of several ways (openings, fillers, typos ... are added afterwards, by
:mod:`headwise.demo.phenomena`). :func:`render` returns the text with its slots, and
:func:`annotate` finds the negation, number and domain spans in it.
"""

from __future__ import annotations

import functools
import random
import re
from dataclasses import dataclass, field
from typing import Any

from headwise.demo.lexicon import CONTRAST_FRAMES, CONTRASTS, CORRECTION_FRAMES, CORRECTIONS
from headwise.demo.templates import DEMO_INTENTS, INTENT_TEMPLATES
from headwise.demo.values import PLACEHOLDERS
from headwise.text.banking_lexicon import DOMAIN, NEGATION, NON_NEGATION

_PIECE = re.compile(r"\(([^()]*)\)|\{(\w+)\}|<([^<>|]*)\|([^<>]*)>|([^({<]+)")
_FINAL = "？。！"
_FINAL_VARIANTS = {"？": ("？", "？", "？", "?", "", "？？"), "。": ("。", "。", "", "！"),
                   "！": ("！", "！", "", "。"), "": ("", "", "", "。")}
_COMMAS = "，，，，，，，， ,"  # a comma typed three ways, as in real chats
#: template tags (`` #neg``) -> the slice names (:mod:`headwise.demo.phenomena`) they give
TEMPLATE_TAGS: dict[str, str] = {"neg": "negation_scope", "order": "word_order",
                                 "long": "long_context"}


@dataclass
class Utterance:
    """A rendered template.

    Attributes:
        text: the message.
        slots: ``(name, start, end, text, value)`` of each slot value.
        numbers: ``(start, end, value)`` of each numeral (``value``: its slot's value).
        also: further intents the template declares (`` @+intent``).
        question: whether the template ends in a question mark.
    """

    text: str = ""
    slots: list[tuple[str, int, int, str, Any]] = field(default_factory=list)
    numbers: list[tuple[int, int, Any]] = field(default_factory=list)
    also: tuple[str, ...] = ()
    question: bool = False


@functools.cache
def template_tags(template: str) -> tuple[str, ...]:
    """The tags after the body of a template (`` #neg #long`` -> ``("neg", "long")``).

    Raises:
        ValueError: a tag that is not one of
            :data:`TEMPLATE_TAGS`.
    """
    tags = tuple(template.split(" #")[1:])
    for tag in tags:
        if tag.strip() not in TEMPLATE_TAGS:
            raise ValueError(f"unknown tag #{tag} in {template!r}")
    return tuple(t.strip() for t in tags)


@functools.cache
def parse_template(template: str) -> tuple[tuple[tuple[str, Any], ...], str, tuple[str, ...]]:
    """Pieces ``(kind, data)`` of a template, its final punctuation and its further intents.

    Kinds: ``text`` (a string), ``slot`` (a placeholder name), ``choice`` (alternatives,
    each a tuple of pieces) and ``pair`` (the alternatives without and with the negation).

    Raises:
        ValueError: an unknown placeholder or a malformed template.
    """
    body, _, extra = template.split(" #")[0].partition(" @+")
    final = body[-1] if body and body[-1] in _FINAL else ""
    return (_pieces(body[: len(body) - len(final)], template), final,
            tuple(x for x in extra.split(",") if x))


def _pieces(body: str, template: str) -> tuple[tuple[str, Any], ...]:
    pieces: list[tuple[str, Any]] = []
    pos = 0
    for m in _PIECE.finditer(body):
        if m.start() != pos:
            break
        pos = m.end()
        if m.group(1) is not None:
            pieces.append(("choice", tuple(_pieces(alt, template)
                                           for alt in m.group(1).split("|"))))
        elif m.group(2) is not None:
            if m.group(2) not in PLACEHOLDERS:
                raise ValueError(f"unknown placeholder {{{m.group(2)}}} in {template!r}")
            pieces.append(("slot", m.group(2)))
        elif m.group(3) is not None:
            pieces.append(("pair", (tuple(m.group(3).split("/")), tuple(m.group(4).split("/")))))
        elif any(c in m.group(5) for c in "|)>}"):
            raise ValueError(f"a stray closing mark in {m.group(5)!r} of {template!r}")
        else:
            pieces.append(("text", m.group(5)))
    if pos != len(body):
        raise ValueError(f"cannot parse template {template!r} near {body[pos:]!r}")
    return tuple(pieces)


def render(template: str, rng: random.Random, *, negate: bool = False,
           final: bool = True) -> Utterance:
    """Render a template into one message.

    Args:
        template: the template.
        rng: the random source of every choice.
        negate: which side of a ``<pos|neg>`` marker to write. Both sides take the same
            draws, so two renderings from equal ``rng`` states differ only there.
        final: type the final punctuation one of several ways (a message); False writes it
            as the template has it (a piece of a compound message, :mod:`headwise.demo.joins`).

    Returns:
        The message with its slots and numerals.
    """
    pieces, last, also = parse_template(template)
    out = Utterance(also=also, question=last == "？")

    def literal(s: str) -> None:
        out.text += "".join(rng.choice(_COMMAS) if c == "，" else c for c in s)

    def write(pieces: tuple[tuple[str, Any], ...]) -> None:
        for kind, data in pieces:
            if kind == "text":
                literal(data)
            elif kind == "choice":
                write(rng.choice(data))
            elif kind == "slot":
                name, render_value = PLACEHOLDERS[data]
                value = render_value(rng)
                start = len(out.text)
                out.text += value.text
                out.slots.append((name, start, len(out.text), value.text, value.value))
                out.numbers += [(start + a, start + b, value.value) for a, b in value.numbers]
            else:
                sides = data[1] if negate else data[0]
                literal(sides[int(rng.random() * len(sides))])  # one draw, whichever side

    write(pieces)
    literal(rng.choice(_FINAL_VARIANTS[last]) if final else last)
    return out


def frame_templates() -> list[tuple[str, int, str, str]]:
    """The contrast and correction templates: ``(kind, frame index, intent, template)``;
    kind ``"contrast"`` or ``"correction"``, the frame's index in its frame list, and the
    template tagged `` #neg`` (the scope of the negation decides the intent)."""
    out = []
    for intent, declined, chosen in CONTRASTS:
        out += [("contrast", k, intent, f.replace("[A]", declined).replace("[B]", chosen))
                for k, f in enumerate(CONTRAST_FRAMES)]
    for x, wants_x, y, wants_y in CORRECTIONS:
        for intent, declined, chosen in ((x, wants_y, wants_x), (y, wants_x, wants_y)):
            out += [("correction", k, intent,
                     f.replace("[A]", declined).replace("[B]", chosen))
                    for k, f in enumerate(CORRECTION_FRAMES)]
    return [(kind, k, intent, t + " #neg") for kind, k, intent, t in out]


def intent_templates() -> dict[str, tuple[str, ...]]:
    """Each intent's templates: its own, its contrasts and its corrections."""
    pools = {intent: list(INTENT_TEMPLATES[intent]) for intent in DEMO_INTENTS}
    for _, _, intent, template in frame_templates():
        pools[intent].append(template)
    return {intent: tuple(templates) for intent, templates in pools.items()}


def _entries() -> dict[str, list[tuple[str, str | None]]]:
    by_first: dict[str, list[tuple[str, str | None]]] = {}
    for words, category in ((NON_NEGATION, None), (NEGATION, "negation"), (DOMAIN, "domain")):
        for word in words:
            by_first.setdefault(word[0], []).append((word, category))
    for entries in by_first.values():
        entries.sort(key=lambda e: -len(e[0]))  # stable: equal lengths keep the order above
    return by_first


_ENTRIES = _entries()


def annotate(text: str, numbers: list[tuple[int, int, Any]]) -> list[tuple[int, int, str, Any]]:
    """Spans ``(start, end, category, value)`` of a message, sorted by position.

    Number spans are the given numerals; negation and domain spans are found by scanning
    left to right with the lexicons, longest word first, outside the numerals. The 不/没 of
    an A-not-A question (要不要, 有没有) and the fixed words of
    :data:`~headwise.text.banking_lexicon.NON_NEGATION` (不好意思, 别人) are not negations.
    """
    blocked = [False] * len(text)
    spans: list[tuple[int, int, str, Any]] = [(s, e, "number", v) for s, e, v in numbers]
    for s, e, _ in numbers:
        blocked[s:e] = [True] * (e - s)
    i = 0
    while i < len(text):
        ch = text[i]
        if blocked[i] or (ch in "不没" and 0 < i < len(text) - 1 and text[i - 1] == text[i + 1]):
            i += 1
            continue
        for word, category in _ENTRIES.get(ch, ()):
            end = i + len(word)
            if text.startswith(word, i) and not any(blocked[i:end]):
                if category is not None:
                    spans.append((i, end, category, None))
                i = end
                break
        else:
            i += 1
    return sorted(spans, key=lambda sp: (sp[0], sp[1]))
