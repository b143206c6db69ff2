"""`hpcval vet --dgemm-n` refused before anything is loaded or measured: an order
too small to measure a BLAS, or an order without ``--dgemm`` (it would be ignored
silently), through the real command: one line naming the flag, exit 2."""

from __future__ import annotations

import pytest

from .conftest import ROOT, assert_clean_failure, run


@pytest.mark.parametrize("argv", [["--dgemm", "--dgemm-n", "10"], ["--dgemm-n", "2048"]])
def test_a_wrong_dgemm_order_is_refused(argv: list[str]) -> None:
    res = run(ROOT, "vet", "--site", "lab", *argv)
    assert_clean_failure(res, 2, f"--dgemm-n {argv[-1]}")
