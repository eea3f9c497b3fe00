"""The encodings of data files as service teams have them: UTF-8 (a byte-order mark allowed),
GB18030/GBK (what Chinese Excel writes a CSV in), UTF-16 and UTF-32 with a byte-order mark,
or any encoding Python knows when it is named.

:func:`detect_encoding` tells a file's encoding from its first bytes: a byte-order mark
first; else UTF-8 when the bytes are valid UTF-8; else GB18030 when they decode cleanly as
GB18030 to text that looks Chinese (:func:`looks_chinese`); else UTF-8, whose undecodable
lines are then reported with :data:`ENCODING_HINT`. :func:`decode_lines` turns the bytes
(in blocks, so a file of any size streams) into physical lines, each with the problem of an
undecodable one, as the readers report it::

    for line, text, problem in decode_lines([data], detect_encoding(data)):
        ...   # problem: "not UTF-8 (byte 0xce at column 1)" or None
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable, Iterator

__all__ = ["ENCODING_HINT", "check_encoding", "decode_lines", "detect_encoding",
           "encoding_name", "looks_chinese"]

#: what a message about undecodable bytes suggests
ENCODING_HINT = ("is the file in another encoding? name it with --encoding (encoding= in "
                 "Python): gb18030 for GBK, Chinese Excel's CSV; utf-16, big5, shift_jis, "
                 "latin-1, ...")
#: byte-order marks and the codec that reads past them (UTF-32's first: its LE mark
#: starts with UTF-16's)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF32_LE, "utf-32"),
         (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
         (codecs.BOM_UTF16_BE, "utf-16"))
#: an undecodable byte b is decoded to the lone surrogate U+DC00+b (as ``surrogateescape``
#: does for UTF-8, but for every codec and byte): valid text of any codec has none
_ESCAPE = "headwise.escape"
_ESCAPED = re.compile("[\udc00-\udcff]")
#: a physical line: ``\n``, ``\r\n`` or a lone ``\r`` ends one (as ``bytes.splitlines``)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r(?!\Z))")


def _escape(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeDecodeError):
        raise error
    bad = error.object[error.start:error.end]
    return "".join(chr(0xDC00 + b) for b in bad), error.end


codecs.register_error(_ESCAPE, _escape)


def check_encoding(encoding: str) -> str:
    """Python's name of the codec ``encoding`` names (``"GBK"`` -> ``"gbk"``,
    ``"utf8"`` -> ``"utf-8"``).

    Raises:
        ValueError: no such codec, or one that does not decode bytes to text.
    """
    try:
        info = codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise ValueError(f"unknown encoding {encoding!r} (--encoding): name one Python "
                         f"knows, e.g. utf-8, gb18030, utf-16, big5, shift_jis, "
                         f"latin-1") from None
    if getattr(info, "_is_text_encoding", True) is False:  # base64, zlib: bytes to bytes
        raise ValueError(f"{encoding!r} is not a text encoding (--encoding)")
    return info.name


def encoding_name(encoding: str) -> str:
    """How messages name an encoding: ``"UTF-8"``, ``"GB18030"``, ``"UTF-16"``."""
    return codecs.lookup(encoding).name.upper()


def looks_chinese(text: str) -> bool:
    """Whether the characters of ``text`` beyond ASCII are (at least 90% of them) common
    Chinese: CJK ideographs, CJK and full-width punctuation or general punctuation (“”…)
    that GB2312 has (its two bytes both above 0x80). A file that is not GB18030 rarely
    decodes as it cleanly, and almost never to that: a Latin letter after a high byte
    (``Müller`` in cp1252) decodes to a rare GBK ideograph outside GB2312."""
    others = [c for c in text if c > "\x7f"]
    if not others:
        return False
    chinese = sum(1 for c in others if _common_chinese(c))
    return chinese >= 0.9 * len(others)


def _common_chinese(c: str) -> bool:
    if not ("\u4e00" <= c <= "\u9fff" or "\u3000" <= c <= "\u303f"
            or "\uff00" <= c <= "\uffef" or "\u2000" <= c <= "\u206f"):
        return False
    try:
        c.encode("gb2312")
    except UnicodeEncodeError:
        return False
    return True


def detect_encoding(head: bytes, *, whole: bool = True) -> str:
    """The encoding of a file whose first bytes (or all, ``whole``) are ``head``.

    A byte-order mark decides (``"utf-8"``, ``"utf-16"``, ``"utf-32"``; the decoders drop
    it); else ``"utf-8"`` when ``head`` is valid UTF-8; else ``"gb18030"`` when it decodes
    cleanly as GB18030 to text that :func:`looks_chinese`; else ``"utf-8"`` (its bad lines
    are then reported as such). A ``head`` that is not the whole file is cut after its last
    line break first, so that a character cut in two does not count against it.
    """
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    if not whole and b"\n" in head:
        head = head[:head.rindex(b"\n") + 1]
    try:
        head.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        text = head.decode("gb18030")
    except UnicodeDecodeError:
        return "utf-8"
    return "gb18030" if looks_chinese(text) else "utf-8"


def decode_lines(blocks: Iterable[bytes], encoding: str
                 ) -> Iterator[tuple[int, str, str | None]]:
    """``(line, text, problem)`` per physical line of the bytes ``blocks`` (a file read in
    pieces of any size) in ``encoding``: the line's number (1-based), its text with its line
    break, and, for a line with bytes that do not decode, ``"not ENCODING (byte 0x.. at
    column N)"`` (its text then holds a lone surrogate per bad byte). A byte-order mark at
    the start is dropped.
    """
    decoder = codecs.getincrementaldecoder(encoding)(errors=_ESCAPE)
    name = encoding_name(encoding)
    number = 0
    pending = ""
    first = True

    def lines(text: str, final: bool) -> Iterator[tuple[int, str, str | None]]:
        nonlocal number, pending, first
        text = pending + text
        if first and text:
            first = False
            text = text.removeprefix("\ufeff")
        end = 0
        for match in _LINE.finditer(text):
            end = match.end()
            number += 1
            yield number, match.group(), _problem(match.group(), name)
        pending = text[end:]
        if final and pending:
            number += 1
            yield number, pending, _problem(pending, name)
            pending = ""

    for block in blocks:
        yield from lines(decoder.decode(block), False)
    yield from lines(decoder.decode(b"", True), True)


def _problem(line: str, name: str) -> str | None:
    bad = _ESCAPED.search(line)
    if bad is None:
        return None
    return f"not {name} (byte 0x{ord(bad.group()) - 0xDC00:02x} at column {bad.start() + 1})"
