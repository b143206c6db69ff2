"""Parsers of benchmark output: one module per output format."""
