"""Lines of ReFrame's output bounded on their way to the terminal and the
run's log (hpcval.run.outputlines)."""

from __future__ import annotations

import io

from hpcval.run.outputlines import bounded_lines


def test_short_lines_pass_as_they_are() -> None:
    text = "[ RUN ] a\nP: bw: 1.0 MB/s\n\nlast without newline"
    assert "".join(bounded_lines(io.StringIO(text))) == text


def test_a_long_line_is_cut_and_says_how_much() -> None:
    lines = list(bounded_lines(io.StringIO("x" * 100_000 + "\nafter\n"), limit=10, read=64))
    assert lines[0].startswith("x" * 10 + " [... 99990 more characters")
    assert lines[0].endswith("stage and output directories]\n")
    assert lines[1] == "after\n"


def test_a_long_last_line_without_newline() -> None:
    (line,) = bounded_lines(io.StringIO("y" * 50), limit=8, read=16)
    assert line.startswith("y" * 8 + " [... 42 more") and not line.endswith("\n")


def test_memory_stays_bounded_whatever_the_line() -> None:
    class Stream(io.StringIO):
        biggest = 0

        def readline(self, size: int = -1) -> str:  # type: ignore[override]
            piece = super().readline(size)
            Stream.biggest = max(Stream.biggest, len(piece))
            return piece

    list(bounded_lines(Stream("z" * 1_000_000 + "\n"), limit=100, read=1000))
    assert Stream.biggest <= 1000
