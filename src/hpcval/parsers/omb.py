"""Parser for OSU Micro-Benchmarks (OMB) point-to-point output, versions 5.x-7.x.

OMB prints a title, optional ``# [ pairs: 2 ] [ window size: 64 ]`` banner,
one header line naming the columns and one row per message size::

    # OSU MPI Multiple Bandwidth / Message Rate Test
    # [ pairs: 2 ] [ window size: 64 ]
    # Size                    MB/s          Messages/s
    # Datatype: MPI_CHAR.
    1                         4.12          4119852.40

Columns are named by the header, so extra columns from newer versions are
read without code changes: ``Validation`` (``-c``: ``Pass``/``Fail``), tail
latencies (``-z``: ``P50 Tail Lat(us)`` ...) and the like. Header names are
normalised: ``Latency (us)`` → ``latency_us``, ``Bandwidth (MB/s)`` →
``bandwidth_mb_per_s``, ``MB/s`` → ``mb_per_s``, ``Messages/s`` →
``messages_per_s``, ``Avg Latency(us)`` → ``avg_latency_us``.

Header names are split on runs of two or more spaces (OMB pads its columns),
which keeps ``Latency (us)`` one name. ``osu_mbw_mr -V`` (vary the window)
prints a size × window matrix instead; it is read into
:attr:`OmbResult.matrices`.

Anything printed before the benchmark's title — Intel MPI's ``I_MPI_DEBUG``
lines (``[0] MPI startup(): ...``), a launcher echoing its command — is kept
in :attr:`OmbResult.preamble`, not parsed. Inside the table, lines that do
not start like a row (runtime messages merged from stderr, such as Open MPI's
``[host:pid] N more processes have sent help message ...``) are kept in
:attr:`OmbResult.messages`; a line that starts like a row but does not fit
the header is refused with its line number. Each column keeps the unit its
header gives (:attr:`OmbResult.units`: ``Overlap(%)`` → ``overlap_pct`` in
``%``, ``Latency (us)`` → ``us``).

Several runs in one output (``osu_latency`` then ``osu_bw`` ... from one job
script) are read run by run by :func:`parse_omb_runs`.

With ``-T all`` (or several ``-T``) OMB 7.x prints one table per datatype,
each under its own ``# Datatype:`` line; :func:`parse_omb_tables` keeps each
apart, keyed by datatype, and :func:`parse_omb` refuses such an output rather
than mix the tables' rows.

A failed run — a usage message, ``This test requires exactly two processes``,
a header without rows, a row cut off or a launcher's ``BAD TERMINATION`` —
raises :class:`~hpcval.core.errors.ParseError` naming the source. A ``Fail`` in a
validation column is kept in the rows and reported by
:meth:`OmbResult.validation_failures`; a check fails on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

_TITLE_RE = re.compile(r"^#\s*OSU\s+(?P<title>.*\S)\s*$")
_PAIRS_RE = re.compile(r"\[\s*pairs:\s*(?P<pairs>\d+)\s*\]")
_WINDOW_RE = re.compile(r"\[\s*window size:\s*(?P<window>\w+)\s*\]")
_DATATYPE_RE = re.compile(r"^#\s*Datatype:\s*(?P<dt>\S+?)\.?\s*$")
_ROW_RE = re.compile(r"^\s*\d+\s")
_FAILURE_MARKERS = (
    "BAD TERMINATION",
    "requires exactly two processes",
    "invalid option",
    "Usage:",
    "Options:",
    "Abort(",
    "MPI_ABORT",
    "Fatal error",
)
_SIZE_NAMES = ("size", "bytes", "message_size")
#: Names a column goes by in other OMB versions (7.4: ``Avg Latency(us)``).
ALIASES = {"latency_us": ("avg_latency_us",), "avg_latency_us": ("latency_us",)}


def normalise_column(header: str) -> str:
    """``Latency (us)`` → ``latency_us``, ``MB/s`` → ``mb_per_s``,
    ``P50 Tail Lat(us)`` → ``p50_tail_lat_us``, ``Overlap(%)`` → ``overlap_pct``."""
    name = header.strip().lower().replace("%", "pct").replace("/", "_per_")
    return re.sub(r"[^a-z0-9]+", "_", name).strip("_")


_UNIT_RE = re.compile(r"\((?P<unit>[^()]+)\)\s*$")
_BARE_UNITS = {"mb/s": "MB/s", "messages/s": "msg/s"}


def column_unit(header: str) -> str | None:
    """The unit a header names: ``Latency (us)`` → ``us``, ``Overlap(%)`` →
    ``%``, ``MB/s`` → ``MB/s``, ``Messages/s`` → ``msg/s``; None for a header
    without one (``Size``, ``Validation``)."""
    if m := _UNIT_RE.search(header.strip()):
        return m.group("unit").strip()
    return _BARE_UNITS.get(header.strip().lower())


@dataclass
class OmbResult:
    """One OMB run: its columns (normalised names) and one dict per size."""

    title: str
    columns: tuple[str, ...]
    rows: list[dict[str, float | str]] = field(default_factory=list)
    pairs: int | None = None
    window: str | None = None
    datatype: str | None = None
    #: ``osu_mbw_mr -V``: name → {size: {window: value}}
    matrices: dict[str, dict[int, dict[int, float]]] = field(default_factory=dict)
    #: Column → unit named by its header (``overlap_pct`` → ``%``).
    units: dict[str, str] = field(default_factory=dict)
    #: Lines before the title (launcher, ``I_MPI_DEBUG`` startup lines).
    preamble: list[str] = field(default_factory=list)
    #: Non-row lines inside the output (runtime messages): (line number, text).
    messages: list[tuple[int, str]] = field(default_factory=list)

    def sizes(self) -> list[int]:
        if self.rows:
            return [int(r["size"]) for r in self.rows]
        first = next(iter(self.matrices.values()), {})
        return sorted(first)

    def resolve(self, name: str) -> str:
        """The name this output uses for column ``name`` (which may be the
        name the same column has in another OMB version)."""
        if name in self.columns:
            return name
        return next((a for a in ALIASES.get(name, ()) if a in self.columns), name)

    def column(self, name: str) -> dict[int, float]:
        """Message size → value of a numeric column (normalised name, or a
        name the same column has in another OMB version)."""
        name = self.resolve(name)
        if name not in self.columns:
            raise KeyError(f"OMB output has no column {name!r} (has {', '.join(self.columns)})")
        return {int(r["size"]): float(r[name]) for r in self.rows}  # type: ignore[arg-type]

    def value(self, name: str, size: int) -> float:
        values = self.column(name)
        if size not in values:
            raise KeyError(f"OMB output has no message size {size} (sizes {self.sizes()})")
        return values[size]

    def validation_failures(self) -> list[int]:
        """Message sizes whose ``Validation`` column does not say ``Pass``."""
        if "validation" not in self.columns:
            return []
        return [int(r["size"]) for r in self.rows if str(r["validation"]).lower() != "pass"]


def _split_header(line: str) -> list[str]:
    body = line.lstrip("#").strip()
    return [p for p in re.split(r"\s{2,}", body) if p]


def _number(token: str) -> float | str:
    try:
        return float(token)
    except ValueError:
        return token


def _fail(source: str, reason: str) -> ParseError:
    return ParseError(f"{source}: {reason}")


def _is_row(line: str) -> bool:
    return bool(_ROW_RE.match(line)) or line.strip().isdigit()


def _is_header(stripped: str) -> bool:
    parts = _split_header(stripped) if stripped.startswith("#") else []
    return bool(parts) and normalise_column(parts[0]) in _SIZE_NAMES


def _table_starts(lines: list[str]) -> list[int]:
    """Indexes of the lines that begin a new table: a ``# Datatype:`` line or a
    column header met after rows of the table before (``-T all`` prints one
    table per datatype)."""
    starts: list[int] = []
    rows_seen = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        if _DATATYPE_RE.match(stripped) or _is_header(stripped):
            if rows_seen:
                starts.append(i)
                rows_seen = False
        elif _is_row(line):
            rows_seen = True
    return starts


def parse_omb_tables(text: str, source: str = "<OMB output>") -> dict[str | None, OmbResult]:
    """Every table of one OMB run, keyed by its datatype (None where OMB
    prints none): ``-T all`` (or several ``-T``) prints one table per
    datatype, each read on its own. A second table of the same datatype (two
    runs in one file) is refused, naming its line."""
    lines = text.splitlines()
    starts = _table_starts(lines)
    if not starts:
        result = _parse_table(lines, source)
        return {result.datatype: result}
    # The first table keeps the lines before it (title, banners, its header);
    # each later one sees those lines, then only its own: other tables'
    # lines are blanked, so line numbers stay those of the file.
    first_row = next(i for i, line in enumerate(lines) if _is_row(line))
    bounds = list(zip([0, *starts], [*starts, len(lines)], strict=True))
    tables: dict[str | None, OmbResult] = {}
    for number, (begin, end) in enumerate(bounds):
        keep = [line if (begin <= i < end or (number and i < first_row)) else ""
                for i, line in enumerate(lines)]
        datatype = next((m.group("dt") for line in reversed(keep)
                         if (m := _DATATYPE_RE.match(line.strip()))), None)
        if datatype in tables:
            raise _fail(source, f"line {begin + 1}: a second {datatype or 'OMB'} table: "
                                "two OMB runs in one output? read it with parse_omb_runs")
        tables[datatype] = _parse_table(keep, source)
    return tables


def parse_omb(text: str, source: str = "<OMB output>") -> OmbResult:
    """Parse one OMB point-to-point run (osu_latency, osu_bw, osu_bibw,
    osu_mbw_mr, osu_multi_lat) of one table; see the module documentation.
    An output of several tables (``-T all``) is refused: read it with
    :func:`parse_omb_tables`."""
    tables = parse_omb_tables(text, source)
    if len(tables) > 1:
        raise _fail(source, f"OMB output of {len(tables)} tables (datatypes "
                            f"{', '.join(str(d) for d in tables)}): read it with "
                            "parse_omb_tables, which keeps each apart")
    return next(iter(tables.values()))


def parse_omb_runs(text: str, source: str = "<OMB output>") -> list[OmbResult]:
    """Several OMB runs one after another in one output (a job script or a
    harness that runs ``osu_latency``, then ``osu_bw``, ...): one
    :class:`OmbResult` per run, in order, each read by :func:`parse_omb`.
    A run begins at its ``# OSU ...`` title; the lines between the previous
    run's last row and that title (a harness's marker, the next ``mpirun``
    command) are the new run's :attr:`OmbResult.preamble`. A run that fails
    to parse raises, naming its number (``(run 3)``)."""
    lines = text.splitlines()
    titles = [i for i, line in enumerate(lines) if _TITLE_RE.match(line.strip())]
    if len(titles) <= 1:
        return [parse_omb(text, source)]
    starts = [0]
    for t in titles[1:]:
        begin = t
        while begin > starts[-1] and not _is_row(lines[begin - 1]):
            begin -= 1  # the lines after the last row belong to the next run
        starts.append(begin)
    bounds = zip(starts, [*starts[1:], len(lines)], strict=True)
    return [parse_omb("\n".join(lines[a:b]) + "\n", f"{source} (run {n})")
            for n, (a, b) in enumerate(bounds, start=1)]


#: What launchers print when they cannot start the program (Open MPI's
#: "unable to launch", hydra's execvp errors, the dynamic loader, the shell).
_LAUNCH_FAILURE_RE = re.compile(
    r"unable to launch|failed to start|could not (?:access|execute|find)|execvp|HYD_\w+|"
    r"No such file|command not found|error while loading shared libraries|"
    r"cannot open shared object|^\s*Executable:", re.IGNORECASE)


def launcher_lines(lines: list[str], width: int = 300) -> str:
    """The launcher's own words where it could not start the program (the
    lines matching :data:`_LAUNCH_FAILURE_RE`, else the last two non-empty
    lines), joined with `` | ``; empty for no output."""
    said = [ln.strip() for ln in lines if _LAUNCH_FAILURE_RE.search(ln)]
    if not said:
        said = [ln.strip() for ln in lines if ln.strip() and set(ln.strip()) != {"-"}][-2:]
    joined = " | ".join(said)
    return joined if len(joined) <= width else joined[:width] + "..."


def _parse_table(lines: list[str], source: str) -> OmbResult:
    text = "\n".join(lines)
    if not any(_TITLE_RE.match(line.strip()) for line in lines) and not any(
            m in text for m in _FAILURE_MARKERS):
        said = launcher_lines(lines)
        raise _fail(source, "no OSU benchmark title: not OMB output" + (
            f"; the output says: {said}" if said else " (the output is empty)"))
    for line in lines:
        for marker in _FAILURE_MARKERS:
            if marker in line:
                raise _fail(source, f"OMB run failed: {line.strip()!r}")
    start = next((i for i, line in enumerate(lines) if _TITLE_RE.match(line.strip())), 0)
    preamble = [line for line in lines[:start] if line.strip()]
    messages: list[tuple[int, str]] = []
    units: dict[str, str] = {}
    title = ""
    pairs: int | None = None
    window: str | None = None
    datatype: str | None = None
    columns: tuple[str, ...] | None = None
    rows: list[dict[str, float | str]] = []
    matrices: dict[str, dict[int, dict[int, float]]] = {}
    matrix_name: str | None = None
    matrix_windows: list[int] = []
    for number, line in enumerate(lines[start:], start=start + 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            m = _TITLE_RE.match(stripped)
            if m:
                title = m.group("title")
                continue
            if _PAIRS_RE.search(stripped) or _WINDOW_RE.search(stripped):
                if (p := _PAIRS_RE.search(stripped)):
                    pairs = int(p.group("pairs"))
                if (w := _WINDOW_RE.search(stripped)):
                    window = w.group("window")
                continue
            if (d := _DATATYPE_RE.match(stripped)):
                datatype = d.group("dt")
                continue
            parts = _split_header(stripped)
            if parts and all(p.isdigit() for p in stripped.lstrip("#").split()):
                # osu_mbw_mr -V: a row of window sizes
                matrix_windows = [int(p) for p in stripped.lstrip("#").split()]
                if matrix_name is None:
                    raise _fail(source, f"line {number}: window row without a table title")
                matrices[matrix_name] = {}
                continue
            if parts and normalise_column(parts[0]) in _SIZE_NAMES:
                names = tuple(["size"] + [normalise_column(p) for p in parts[1:]])
                columns = names
                units = {n: u for n, p in zip(names[1:], parts[1:], strict=True)
                         if (u := column_unit(p))}
                continue
            # any other comment names the table that follows (vary-window mode)
            matrix_name = normalise_column(stripped.lstrip("#"))
            continue
        if not _ROW_RE.match(line) and not stripped.isdigit():
            if not stripped[0].isdigit():
                messages.append((number, stripped))  # a runtime message, not a row
                continue
            raise _fail(source, f"line {number}: unexpected text {stripped[:60]!r}")
        tokens = stripped.split()
        if matrix_windows and matrix_name in matrices and columns is None:
            if len(tokens) != len(matrix_windows) + 1:
                raise _fail(source, f"line {number}: row cut off ({len(tokens) - 1} of "
                                    f"{len(matrix_windows)} window values) — truncated output?")
            try:
                values = [float(t) for t in tokens[1:]]
            except ValueError:
                raise _fail(source, f"line {number}: non-numeric value in {stripped!r}") from None
            matrices[matrix_name][int(tokens[0])] = dict(zip(matrix_windows, values, strict=True))
            continue
        if columns is None:
            raise _fail(source, f"line {number}: data row before any column header")
        if len(tokens) != len(columns):
            raise _fail(source, f"line {number}: row has {len(tokens)} fields, header names "
                                f"{len(columns)} ({', '.join(columns)}) — truncated output?")
        row: dict[str, float | str] = {}
        for name, token in zip(columns, tokens, strict=True):
            row[name] = _number(token)
        for name, val in row.items():
            if name != "validation" and isinstance(val, str):
                raise _fail(source, f"line {number}: column {name} is not a number: {val!r}")
        rows.append(row)
    if not title:
        raise _fail(source, "no OSU benchmark title: not OMB output")
    if columns is None and not matrices:
        raise _fail(source, f"{title}: no column header — the run ended before measuring")
    if not rows and not any(matrices.values()):
        raise _fail(source, f"{title}: header but no measured rows — the run failed or was "
                            "cut off before its first message size")
    return OmbResult(title=title, columns=columns or ("size",), rows=rows, pairs=pairs,
                     window=window, datatype=datatype, matrices=matrices, units=units,
                     preamble=preamble, messages=messages)


def check_complete(result: OmbResult, max_size: int, source: str = "<OMB output>") -> OmbResult:
    """``result``, or ParseError when the run stopped before ``max_size`` (a
    killed run prints whole rows up to where it stopped)."""
    sizes = result.sizes()
    if not sizes or max(sizes) < max_size:
        last = max(sizes) if sizes else None
        raise _fail(source, f"{result.title}: last message size {last}, expected up to "
                            f"{max_size} — the run was cut off")
    return result
