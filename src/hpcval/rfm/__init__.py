"""ReFrame building blocks of hpcval: the base mixin and the benchmark base tests."""

from hpcval.rfm.base import HpcvalTest

__all__ = ["HpcvalTest"]
