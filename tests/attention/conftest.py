"""Shared fixtures for the attention tests."""

from __future__ import annotations

import pytest

from headwise.attention.kernels import tiled


@pytest.fixture
def small_tiles(monkeypatch):
    """Make the tiled kernel use small, uneven tiles so tests cross many tile borders."""
    monkeypatch.setattr(tiled, "DEFAULT_BLOCK_Q", 32)
    monkeypatch.setattr(tiled, "DEFAULT_BLOCK_K", 48)
