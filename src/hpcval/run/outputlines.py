"""ReFrame's output, read line by line with every line bounded.

ReFrame prints the last ten lines of a failed job's output and error
(``--- rfm_job.out (last 10 lines) ---``): a benchmark that printed one line
of 80 MB put 80 MB on the terminal and in the run's log (``var/<site>/logs/
<run id>.out``) for each of its files, and hpcval held each line whole in
memory to forward it. Each line is read in pieces of at most
:data:`READ_CHARS` and cut at :data:`MAX_LINE_CHARS`, saying how much was cut
and where the whole output is: where ReFrame keeps it, the test case's stage
and output directories (``var/<site>/stage/<run id>/``, ``output/<run id>/``),
which are untouched.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

#: Characters of one line that reach the terminal and the run's log.
MAX_LINE_CHARS = 4096
#: Characters read at a time (a line longer than this is read in pieces).
READ_CHARS = 1 << 16

CUT_NOTE = ("[... {cut} more characters of this line cut here: the test's whole output is "
            "in its stage and output directories]")


def bounded_lines(stream: IO[str], limit: int = MAX_LINE_CHARS,
                  read: int = READ_CHARS) -> Iterator[str]:
    """The lines of *stream*, each at most *limit* characters plus the
    note of what was cut, ending with its newline where it had one. Memory
    stays within *read* + *limit* characters whatever a line's length."""
    head: list[str] = []
    kept = cut = 0
    while True:
        piece = stream.readline(read)
        if not piece:
            break
        ends = piece.endswith("\n")
        body = piece[:-1] if ends else piece
        room = limit - kept
        if room > 0:
            head.append(body[:room])
            kept += min(room, len(body))
        cut += max(0, len(body) - max(room, 0))
        if ends:
            yield _line(head, cut, "\n")
            head, kept, cut = [], 0, 0
    if head or cut:
        yield _line(head, cut, "")


def _line(head: list[str], cut: int, end: str) -> str:
    text = "".join(head)
    if cut:
        text += " " + CUT_NOTE.format(cut=cut)
    return text + end
