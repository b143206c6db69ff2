"""Shared fixtures: paths of the checkout and of recorded test data."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def root() -> Path:
    return ROOT
