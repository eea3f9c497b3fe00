"""CJK fonts for matplotlib figures: the one place that chooses a font with Chinese glyphs,
shared by the training metrics' confusion matrix and the head-analysis report.

matplotlib is imported on first use, so importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["CJK_FONTS", "cjk_font", "installed_cjk_font", "pick_cjk_font", "quiet_fonts"]

#: fonts with CJK glyphs, most preferred first; matched as prefixes of installed names
CJK_FONTS = (
    "Noto Sans CJK SC", "Noto Sans CJK", "Noto Sans SC", "Source Han Sans SC",
    "Source Han Sans", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei", "Sarasa Gothic SC",
    "Droid Sans Fallback", "AR PL UMing", "AR PL UKai", "SimHei", "Microsoft YaHei",
    "PingFang SC", "Heiti SC", "Hiragino Sans GB", "Arial Unicode MS",
)


def pick_cjk_font(available: Iterable[str]) -> str | None:
    """The most preferred CJK font among ``available`` family names, or None."""
    names = set(available)
    for wanted in CJK_FONTS:
        hits = sorted(n for n in names if n.startswith(wanted))
        if hits:
            return hits[0]
    return None


@functools.lru_cache(maxsize=1)
def installed_cjk_font() -> str | None:
    """The preferred CJK font among those matplotlib's font cache knows, or None."""
    from matplotlib import font_manager

    return pick_cjk_font(f.name for f in font_manager.fontManager.ttflist)


def cjk_font() -> str | None:
    """An installed CJK font family, also one installed after matplotlib built its cache
    (the system's font files are searched and added once)."""
    font = installed_cjk_font()
    if font is not None:
        return font
    from matplotlib import font_manager

    for path in font_manager.findSystemFonts():
        if re.search(r"cjk|wqy|wenquanyi|droid|sourcehan", Path(path).name, re.IGNORECASE):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
    return pick_cjk_font(f.name for f in font_manager.fontManager.ttflist)


@contextlib.contextmanager
def quiet_fonts() -> Iterator[None]:
    """Silence missing-glyph warnings and font-matching log lines (the fallbacks are fine)."""
    logger = logging.getLogger("matplotlib.font_manager")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Glyph .* missing from")
            yield
    finally:
        logger.setLevel(level)
