"""Parser for Intel MPI Benchmarks output (IMB-MPI1, -NBC, -P2P, -RMA, -EXT, -IO).

IMB prints one table per benchmark and process count::

    #---------------------------------------------------
    # Benchmarking PingPong
    # #processes = 2
    #---------------------------------------------------
           #bytes #repetitions      t[usec]   Mbytes/sec
                0          200         2.01         0.00

Later process counts of the same benchmark repeat only the ``#processes``
banner. Columns are named by the header line, so the same code reads PingPong
(``t[usec]``), collectives (``t_min[usec] t_max[usec] t_avg[usec]``),
Sendrecv/Exchange (plus ``Mbytes/sec``), IMB-NBC (``t_ovrl``, ``t_CPU``,
``overlap[%]``) and Barrier (no ``#bytes``). A row that IMB aborted prints
``time-out.`` or ``out-of-mem.`` instead of numbers; those are kept as
:class:`ImbRowError` so a check can fail with IMB's own explanation.

Variants read (each with a recorded output in ``tests/data/imb``):

* ``-multi 0|1``: a ``# Benchmarking Multi-<name>`` block with a ``( N groups of
  M processes each running simultaneous )`` banner instead of ``#processes``;
  the table is kept under its printed name (``Multi-PingPong``) with
  :attr:`ImbTable.groups` = N and :attr:`ImbTable.processes` = M. With
  ``-multi 1`` every group has its own row (a ``group`` column) and blank
  lines separate the sizes. :meth:`ImbTable.group_tables` splits such a table
  into one table per group (its rows without the ``group`` column), and
  :attr:`ImbTable.members` holds the ranks of each group as the banner lists
  them (``# Group  0:     0    1``).
* Intel MPI's rank placement table (``I_MPI_DEBUG=4``: ``[0] MPI startup():
  Rank Pid Node name Pin cpu``) before the banner: :attr:`ImbResult.hosts`
  (rank -> host), so a ``-multi`` group can be tied to the nodes it ran on.
* Lines that are not rows inside a table — MPI runtime messages merged from
  stderr (Open MPI's ``[host:pid] N more processes have sent help message``,
  its ``-----`` help blocks, Intel MPI's ``[0] MPI startup(): ...``), bracketed
  annotation lines — are kept in :attr:`ImbTable.messages`, not parsed. A line
  that starts like a row (a number) but does not fit the header is refused
  with its line number: a wrapped, cut or corrupted row.
* IMB-EXT, IMB-RMA and IMB-IO's writes print a benchmark in two modes, same
  name and process count (IMB-RMA ``#    MODE: NON-AGGREGATE`` then
  ``AGGREGATE``, IMB-EXT and IMB-IO ``AGGREGATE`` then ``NON-AGGREGATE``;
  IMB-EXT's Window prints no ``MODE`` line, IMB-IO's reads only
  ``AGGREGATE``): two tables, told apart by :attr:`ImbTable.mode`;
  :meth:`ImbResult.table` and :func:`check_complete` take the mode to read
  and refuse to guess between two.
* Banners ``Intel(R) MPI Benchmarks 2021.11``, ``Intel (R) MPI Benchmarks
  2018`` and ``Intel (R) MPI Benchmark Suite V2.3``, and IMB-IO 2021.7's,
  run into its dashed line (``MPI-IO partn#---``); IMB 2.x prints no
  ``All processes entering MPI_Finalize`` line, so its output counts as
  finished when it holds tables (completeness is then judged by the sizes).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

_BENCH_RE = re.compile(r"^#\s*Benchmarking\s+(?P<name>\S+)")
_PROCS_RE = re.compile(r"^#\s*#processes\s*=\s*(?P<n>\d+)")
_GROUPS_RE = re.compile(r"^#\s*\(\s*(?P<groups>\d+)\s+groups? of\s+(?P<n>\d+)\s+process")
_MEMBERS_RE = re.compile(r"^#\s*Group\s+(?P<group>\d+)\s*:(?P<ranks>(?:\s+\d+)+)\s*$")
#: Intel MPI's placement table (I_MPI_DEBUG >= 4): ``[0] MPI startup(): 3  1234  lab-n8  {0-1}``
_PLACEMENT_RE = re.compile(r"^\[\d+\] MPI startup\(\):\s+(?P<rank>\d+)\s+\d+\s+(?P<host>\S+)\s+\{")
_VERSION_RE = re.compile(
    r"Intel\s?\(R\) MPI Benchmark(?:s| Suite)?\s+V?(?P<version>\d[\w.]*)")
_HEADER_RE = re.compile(r"^(?:Group\s+)?#(?:bytes|repetitions)\b")
_ROW_START_RE = re.compile(r"^[-+]?\d")
_MODE_RE = re.compile(r"^#\s*MODE:\s*(?P<mode>[A-Z-]+)")
_FINALIZE = "All processes entering MPI_Finalize"
_ERROR_RE = re.compile(r"^\s*(?P<bytes>\d+)\s+(?P<kind>time-out|out-of-mem)\.?;?\s*(?P<msg>.*)$")


def normalise_column(header: str) -> str:
    """``t_min[usec]`` → ``t_min_usec``, ``Mbytes/sec`` → ``mbytes_per_sec``,
    ``#bytes`` → ``bytes``, ``overlap[%]`` → ``overlap_pct``."""
    name = header.strip().lstrip("#").lower()
    name = name.replace("[%]", "_pct").replace("/", "_per_")
    name = re.sub(r"\[(\w+)\]", r"_\1", name)
    return re.sub(r"[^a-z0-9_]+", "_", name).strip("_")


@dataclass(frozen=True)
class ImbRowError:
    """A message size IMB did not measure (``time-out`` or ``out-of-mem``)."""

    bytes: int
    kind: str
    message: str


@dataclass
class ImbTable:
    """One result table: a benchmark at one process count."""

    benchmark: str
    processes: int
    columns: tuple[str, ...]
    rows: list[dict[str, float]] = field(default_factory=list)
    errors: list[ImbRowError] = field(default_factory=list)
    #: ``-multi``: number of groups running the benchmark at once (None otherwise).
    groups: int | None = None
    #: Non-row lines found inside the table (runtime messages): (line number, text).
    messages: list[tuple[int, str]] = field(default_factory=list)
    #: IMB-EXT, IMB-RMA, IMB-IO: ``AGGREGATE`` or ``NON-AGGREGATE`` (``# MODE: ...``
    #: above the table; both modes of a benchmark are two tables), else None.
    mode: str | None = None
    #: ``-multi``: group -> its ranks in MPI_COMM_WORLD, as the banner lists them.
    members: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def group_tables(self) -> dict[int, ImbTable]:
        """``-multi 1``: one table per group (group number -> its rows, without the
        ``group`` column), every group the banner lists, in order; a group IMB
        printed no row for has an empty table. :class:`ParseError` for a table
        without a ``group`` column (``-multi 0`` prints only the worst group)."""
        if "group" not in self.columns:
            raise ParseError(f"IMB {self.benchmark}: no per-group rows (columns: "
                             f"{', '.join(self.columns)}); run it with -multi 1")
        columns = tuple(c for c in self.columns if c != "group")
        numbers = sorted(set(self.members) | {int(r["group"]) for r in self.rows})
        out = {g: ImbTable(self.benchmark, self.processes, columns,
                           members={g: self.members[g]} if g in self.members else {})
               for g in numbers}
        for r in self.rows:
            out[int(r["group"])].rows.append({c: v for c, v in r.items() if c != "group"})
        return out

    def label(self) -> str:
        """``Unidir_Put (np=2, AGGREGATE)``: the benchmark, its process count and
        its mode where IMB printed one, as messages name a table."""
        mode = f", {self.mode}" if self.mode else ""
        return f"{self.benchmark} (np={self.processes}{mode})"

    def sizes(self) -> list[int]:
        """Message sizes measured, in table order."""
        return [int(r["bytes"]) for r in self.rows if "bytes" in r]

    def row(self, size: int) -> dict[str, float]:
        """The row for one message size; :class:`ParseError` if IMB did not
        measure it (with IMB's reason where it gave one)."""
        for r in self.rows:
            if int(r.get("bytes", -1)) == size:
                return r
        for e in self.errors:
            if e.bytes == size:
                raise ParseError(
                    f"IMB {self.label()}: {size} B not measured: "
                    f"{e.kind}: {e.message}".rstrip(": ")
                )
        raise ParseError(
            f"IMB {self.label()}: no row for {size} B "
            f"(measured: {_fmt_sizes(self.sizes())})"
        )

    def value(self, size: int, column: str) -> float:
        """One figure, e.g. ``value(1048576, 'mbytes_per_sec')``."""
        r = self.row(size)
        if column not in r:
            raise ParseError(
                f"IMB {self.benchmark}: no column {column!r} (columns: {', '.join(self.columns)})"
            )
        return r[column]

    def series(self, column: str) -> list[tuple[int, float]]:
        """(size, value) pairs for one column over all measured sizes."""
        return [(int(r["bytes"]), r[column]) for r in self.rows if column in r and "bytes" in r]


@dataclass
class ImbResult:
    """Everything one IMB invocation printed."""

    version: str | None
    tables: list[ImbTable]
    #: The run ended: ``All processes entering MPI_Finalize`` was printed (or,
    #: for IMB 2.x, which prints no such line, the output holds tables).
    finished: bool
    #: rank -> host from Intel MPI's placement table (``I_MPI_DEBUG=4``); empty without it
    hosts: dict[int, str] = field(default_factory=dict)

    def table(self, benchmark: str, processes: int | None = None,
              mode: str | None = None) -> ImbTable:
        """The table of ``benchmark``; the one with the most processes unless
        ``processes`` is given. IMB-EXT, IMB-RMA and IMB-IO print a benchmark in two
        modes, two tables: ``mode`` (``AGGREGATE`` or ``NON-AGGREGATE``)
        selects one; without it, output holding both is refused (reading the
        first silently would judge the wrong mode)."""
        found = [t for t in self.tables if t.benchmark.lower() == benchmark.lower()]
        if processes is not None:
            found = [t for t in found if t.processes == processes]
        if mode is not None:
            found = [t for t in found if (t.mode or "").upper() == mode.upper()]
        if not found:
            have = ", ".join(f"{t.benchmark}(np={t.processes}"
                             f"{', ' + t.mode if t.mode else ''})" for t in self.tables) or "none"
            want = benchmark if processes is None else f"{benchmark}(np={processes})"
            if mode is not None:
                want += f" in mode {mode}"
            raise ParseError(f"IMB output has no table for {want} (tables: {have})")
        best = max(t.processes for t in found)
        modes = sorted({t.mode for t in found if t.processes == best and t.mode})
        if mode is None and len(modes) > 1:
            raise ParseError(f"IMB output has {benchmark}(np={best}) in {len(modes)} modes "
                             f"({', '.join(modes)}): give the mode to read")
        return max(found, key=lambda t: t.processes)

    def modes(self, benchmark: str) -> list[str]:
        """The modes ``benchmark`` was printed in (IMB-EXT, IMB-RMA, IMB-IO), in order."""
        seen: list[str] = []
        for t in self.tables:
            if t.benchmark.lower() == benchmark.lower() and t.mode and t.mode not in seen:
                seen.append(t.mode)
        return seen


def _fmt_sizes(sizes: Iterable[int]) -> str:
    sizes = list(sizes)
    return ", ".join(str(s) for s in sizes) if sizes else "none"


def _to_number(token: str, line_no: int, source: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise ParseError(
            f"{source}:{line_no}: not a number in an IMB table row: {token!r}"
        ) from None


def parse_imb(text: str, source: str = "IMB output") -> ImbResult:
    """Parse the whole output of one IMB run.

    Raises :class:`ParseError` when no result table is present or a table row
    holds something other than numbers (garbage, interleaved messages).
    Truncation is reported through :attr:`ImbResult.finished` and the rows
    present; :func:`check_complete` turns it into an error.
    """
    version_match = _VERSION_RE.search(text)
    tables: list[ImbTable] = []
    benchmark: str | None = None
    processes: int | None = None
    groups: int | None = None
    mode: str | None = None
    current: ImbTable | None = None
    members: dict[int, tuple[int, ...]] = {}
    hosts: dict[int, str] = {}
    finished = False

    lines = text.splitlines()
    last_line = max((i for i, ln in enumerate(lines, start=1) if ln.strip()), default=0)
    for line_no, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if _FINALIZE in line:
            finished = True
            current = None
            continue
        if m := _PLACEMENT_RE.match(line):
            hosts[int(m.group("rank"))] = m.group("host")
            continue
        if m := _BENCH_RE.match(line):
            benchmark, processes, groups, current = m.group("name"), None, None, None
            mode = None
            members = {}
            continue
        if m := _MEMBERS_RE.match(line):
            members[int(m.group("group"))] = tuple(int(r) for r in m.group("ranks").split())
            continue
        if m := _PROCS_RE.match(line):
            processes, groups, current, mode = int(m.group("n")), None, None, None
            continue
        if m := _GROUPS_RE.match(line):
            processes, groups, current = int(m.group("n")), int(m.group("groups")), None
            mode = None
            continue
        if m := _MODE_RE.match(line):
            mode, current = m.group("mode"), None
            continue
        stripped = line.strip()
        if not stripped:
            continue  # -multi 1 separates sizes by blank lines
        if _HEADER_RE.match(stripped):
            if benchmark is None or processes is None:
                raise ParseError(f"{source}:{line_no}: table header outside a benchmark section")
            columns = tuple(normalise_column(c) for c in stripped.split())
            current = ImbTable(benchmark, processes, columns, groups=groups, mode=mode,
                               members=dict(members))
            tables.append(current)
            continue
        if stripped.startswith("#") or current is None:
            continue
        if m := _ERROR_RE.match(line):
            current.errors.append(
                ImbRowError(int(m.group("bytes")), m.group("kind"), m.group("msg").strip())
            )
            continue
        if not _ROW_START_RE.match(stripped):
            current.messages.append((line_no, stripped))  # a runtime message, not a row
            continue
        tokens = stripped.split()
        if line_no == last_line and not text.endswith("\n"):
            break  # a row cut off where the output stops: truncation, not garbage
        if len(tokens) != len(current.columns):
            raise ParseError(
                f"{source}:{line_no}: IMB {current.benchmark} row has {len(tokens)} fields, "
                f"header has {len(current.columns)} ({' '.join(current.columns)}): "
                f"{stripped!r} (a wrapped, cut or corrupted row)"
            )
        values = zip(current.columns, tokens, strict=True)
        current.rows.append({c: _to_number(t, line_no, source) for c, t in values})

    if not tables:
        raise ParseError(f"{source}: no IMB result table found")
    version = version_match.group("version").rstrip(".,") if version_match else None
    if not finished and version is not None and version.split(".")[0].isdigit() \
            and int(version.split(".")[0]) < 3:
        finished = True  # IMB 2.x never prints the MPI_Finalize line
    return ImbResult(version=version, tables=tables, finished=finished, hosts=hosts)


def check_complete(result: ImbResult, benchmark: str, sizes: Iterable[int],
                   processes: int | None = None, source: str = "IMB output",
                   mode: str | None = None) -> ImbTable:
    """The table of ``benchmark``, or :class:`ParseError` naming what is wrong:
    a size IMB aborted (time-out, out-of-mem), a missing size, or output that
    stops before ``MPI_Finalize`` (a crashed or killed run). ``mode``
    (``AGGREGATE`` or ``NON-AGGREGATE``) selects one of the two tables IMB-EXT,
    IMB-RMA and IMB-IO print for a benchmark, as :meth:`ImbResult.table` does."""
    table = result.table(benchmark, processes, mode)
    for size in sizes:
        table.row(size)
    if table.errors:
        e = table.errors[0]
        raise ParseError(f"{source}: IMB {table.label()} {e.bytes} B: {e.kind}: {e.message}")
    if not result.finished:
        sizes = table.sizes()  # none for Barrier, whose rows have no #bytes
        raise ParseError(
            f"{source}: IMB output ends before 'All processes entering MPI_Finalize' "
            f"(last {benchmark} size: {sizes[-1] if sizes else 'none'}): "
            "the run crashed or was killed"
        )
    return table


_BANNER_RE = re.compile(r"^#\s+Intel\s?\(R\) MPI Benchmark", re.MULTILINE)


def parse_imb_runs(text: str, source: str = "IMB output") -> list[ImbResult]:
    """Parse output holding several IMB invocations one after another (a job
    that repeats a benchmark to sample it); one :class:`ImbResult` per run."""
    starts = [m.start() for m in _BANNER_RE.finditer(text)]
    if not starts:
        return [parse_imb(text, source)]
    # each banner sits below a dashed line that belongs to the same run
    starts = [text.rfind("\n", 0, max(s - 1, 0)) + 1 if s else 0 for s in starts]
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]
    return [parse_imb(chunk, f"{source} (run {i + 1})") for i, chunk in enumerate(chunks)]
