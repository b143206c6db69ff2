"""Parser for IOR 4.x results: the JSON summary and the ``-v`` text output.

hpcval runs IOR with ``-O summaryFormat=JSON -O summaryFile=FILE``. The file
holds the run's parameters, one ``Results`` entry per operation and
repetition (``bwMiB``, ``iops``, open/transfer/close times) and a
``summary`` with one entry per operation::

    "summary": [
        {"operation": "write", "API": "POSIX", "blockSize": 16777216,
         "transferSize": 1048576, "numTasks": 2, "filePerProc": 1,
         "reorderTasks": 1, "bwMaxMIB": 2083.4468, "bwMeanMIB": 2037.4334, ...},
        {"operation": "read", ...}]

IOR writes the file as it goes, so a run that fails (a directory it cannot
create files in, a full disk, an abort) leaves a file cut off after
``"Results": [``. Such a file, garbage, or a summary without the operations a
check asks for raise :class:`~hpcval.core.errors.ParseError` naming the source.

The text output carries ``Max Write:``/``Max Read:`` lines only with ``-v``
in IOR 4, and a ``Summary of all tests`` table always;
:func:`parse_ior_text` reads both, for runs made without a summary file.

One output can hold several tests: IOR runs every section of a ``-f`` script
and every repeated ``RUN`` block, numbering them ``TestID`` 0, 1, ... Each
test's figures are kept apart, keyed by that number:
:func:`parse_ior_json_tests` and :func:`parse_ior_text_tests`. The one-test
readers (:func:`parse_ior_json`, :func:`parse_ior_text`) refuse such an
output with a message pointing to them, rather than mixing the tests.

One output can also hold several IOR *runs*: job outputs appended to one
file, or a script running IOR once per configuration into one log (as the
XDMoD application kernels do). Each run prints its own banner (``IOR-3.3.0:
MPI Coordinated Test of Parallel I/O``) and numbers its tests from ``TestID
0`` again, so the ``TestID`` does not tell the runs apart.
:func:`parse_ior_text_runs` reads every run on its own (its command line,
its tests, the ``Max Write``/``Max Read`` lines of its own section); the
other text readers refuse such an output, naming the banners' lines, rather
than mixing the runs. Several JSON summaries appended in one file are read
by :func:`parse_ior_json_runs` and refused by the other JSON readers.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from hpcval.core.errors import ParseError

#: Operations IOR reports bandwidth for.
OPERATIONS = ("write", "read")

_ERROR_RE = re.compile(r"^(ERROR|Error |WARNING|Abort\(|.*MPI_ABORT|.*BAD TERMINATION).*$", re.M)
_MAX_RE = re.compile(r"^Max (?P<op>Write|Read):\s+(?P<mib>[0-9.]+) MiB/sec", re.M)
#: The first line of every IOR run (IOR 3.x and 4.x).
_BANNER_RE = re.compile(r"^IOR-\S+: MPI Coordinated Test of Parallel I/O", re.M)
_COMMAND_RE = re.compile(r"^Command line(?: used)?\s*:\s*(?P<cmd>.*?)\s*$", re.M)


@dataclass(frozen=True)
class IorOperation:
    """One operation (``write`` or ``read``) of an IOR test, over its repetitions."""

    operation: str
    bw_max_mib: float
    bw_min_mib: float
    bw_mean_mib: float
    bw_std_mib: float
    ops_max: float | None = None
    ops_mean: float | None = None
    mean_time_s: float | None = None
    #: Bandwidth of each repetition (MiB/s), from ``Results``.
    repetitions_mib: tuple[float, ...] = ()


@dataclass
class IorResult:
    """One IOR test: what ran and its operations."""

    api: str
    file_per_proc: bool
    num_tasks: int
    block_size: int
    transfer_size: int
    segment_count: int = 1
    repetitions: int = 1
    reorder_tasks: bool = False
    tasks_per_node: int | None = None
    version: str | None = None
    command_line: str | None = None
    #: Total bytes moved per operation and repetition, in MiB.
    aggregate_mib: float | None = None
    operations: dict[str, IorOperation] = field(default_factory=dict)

    @property
    def layout(self) -> str:
        return "file-per-process" if self.file_per_proc else "shared"

    def op(self, name: str) -> IorOperation:
        if name not in self.operations:
            raise KeyError(f"IOR result has no {name!r} operation "
                           f"(has {', '.join(self.operations) or 'none'})")
        return self.operations[name]

    def max_mib(self, name: str) -> float:
        return self.op(name).bw_max_mib

    def mean_mib(self, name: str) -> float:
        return self.op(name).bw_mean_mib


def _fail(source: str, reason: str) -> ParseError:
    return ParseError(f"{source}: {reason}")


def ior_errors(text: str) -> list[str]:
    """IOR's own ``ERROR``/``Error``/``WARNING`` lines and MPI abort lines in *text*."""
    return [m.group(0).strip() for m in _ERROR_RE.finditer(text)]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _number(entry: dict[str, Any], key: str, source: str, what: str) -> float:
    value = entry.get(key)
    if not _is_number(value):
        raise _fail(source, f"{what}: {key!r} missing or not a finite number ({value!r:.40})")
    return float(value)


def _optional(entry: dict[str, Any], key: str) -> float | None:
    value = entry.get(key)
    return float(value) if _is_number(value) else None


def _tests(doc: dict[str, Any]) -> list[dict[str, Any]]:
    tests = doc.get("tests")
    return [t for t in tests if isinstance(t, dict)] if isinstance(tests, list) else []


def _results(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Flat list of per-repetition results of all tests (IOR nests them per
    repetition in some versions and lists them flat in others)."""
    flat: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict) and "access" in node:
            flat.append(node)

    for test in _tests(doc):
        walk(test.get("Results"))
    return flat


def parse_ior_json(text: str, source: str = "<IOR JSON summary>",
                   require: tuple[str, ...] = OPERATIONS) -> IorResult:
    """Parse an IOR JSON summary file (``-O summaryFormat=JSON``) of one test.

    *require*: operations that must be in the summary (default write and
    read); a summary without one raises :class:`ParseError`.
    """
    doc = _load_json(text, source)
    summary = doc.get("summary")
    if not isinstance(summary, list) or not summary:
        raise _fail(source, "IOR JSON without a 'summary' list: the run did not finish")
    test_ids = {repr(e.get("TestID")) for e in summary if isinstance(e, dict)}
    if len(test_ids) > 1:
        raise _fail(source, f"IOR summary of {len(test_ids)} tests (TestID "
                            f"{', '.join(str(t) for t in sorted(test_ids, key=str))}): read it "
                            "with parse_ior_json_tests, which keeps each test apart")
    return _json_result(doc, summary, _results(doc), source, require)


def _load_json(text: str, source: str) -> dict[str, Any]:
    if not text.strip():
        raise _fail(source, "empty IOR summary: IOR did not run or failed before writing it")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        runs = len(_json_documents(text)) if err.msg == "Extra data" else 0
        if runs > 1:
            raise _fail(source, f"{runs} IOR JSON summaries appended in one file (one per "
                                "run): read it with parse_ior_json_runs, which keeps each run "
                                "apart") from None
        cut = "Results" in text and '"summary"' not in text
        reason = ("IOR stopped before its summary (the file ends inside the results): "
                  "the run failed; see its output for IOR's ERROR lines" if cut
                  else "not an IOR JSON summary")
        raise _fail(source, f"{reason} ({err.msg} at line {err.lineno} column {err.colno})") \
            from None
    if not isinstance(doc, dict):
        raise _fail(source, f"not an IOR JSON summary (a JSON {type(doc).__name__})")
    return doc


def _json_documents(text: str) -> list[str]:
    """The JSON documents written one after another in *text* (IOR runs
    appended to one file), each as its text; [] if *text* is not such a
    sequence of JSON objects."""
    decoder = json.JSONDecoder()
    docs: list[str] = []
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at >= len(text):
            return docs
        try:
            doc, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return []
        if not isinstance(doc, dict):
            return []
        docs.append(text[at:end])
        at = end


def parse_ior_json_runs(text: str, source: str = "<IOR JSON summary>",
                        require: tuple[str, ...] = OPERATIONS) -> list[dict[int, IorResult]]:
    """Every run of a file holding one or more IOR JSON summaries written one
    after another (runs appended to one file): per run, its tests keyed by
    ``TestID`` (:func:`parse_ior_json_tests`), in the order of the file."""
    docs = _json_documents(text) if text.strip() else []
    if len(docs) <= 1:
        return [parse_ior_json_tests(text, source, require)]
    return [parse_ior_json_tests(doc, f"{source} (run {i} of {len(docs)})", require)
            for i, doc in enumerate(docs, start=1)]


def parse_ior_json_tests(text: str, source: str = "<IOR JSON summary>",
                         require: tuple[str, ...] = OPERATIONS) -> dict[int, IorResult]:
    """Every test of an IOR JSON summary, keyed by its ``TestID`` (a ``-f``
    script or repeated ``RUN`` blocks give several); each from its own
    summary entries and repetitions only."""
    doc = _load_json(text, source)
    summary = doc.get("summary")
    if not isinstance(summary, list) or not summary:
        raise _fail(source, "IOR JSON without a 'summary' list: the run did not finish")
    by_test: dict[int, list[dict[str, Any]]] = {}
    for entry in summary:
        if not isinstance(entry, dict):
            raise _fail(source, f"summary entry is not an object: {entry!r:.80}")
        test_id = entry.get("TestID", 0)
        if isinstance(test_id, bool) or not isinstance(test_id, int):
            raise _fail(source, f"summary entry with a TestID that is not a number: {test_id!r}")
        by_test.setdefault(test_id, []).append(entry)
    tests = _tests(doc)
    results: dict[int, list[dict[str, Any]]] = {}
    for test in tests:
        test_id = test.get("TestID")
        if isinstance(test_id, int) and not isinstance(test_id, bool):
            results[test_id] = _results({"tests": [test]})
    return {tid: _json_result(doc, entries, results.get(tid, []),
                              f"{source} (TestID {tid})", require)
            for tid, entries in sorted(by_test.items())}


def _json_result(doc: dict[str, Any], summary: list[Any], results: list[dict[str, Any]],
                 source: str, require: tuple[str, ...]) -> IorResult:
    per_rep: dict[str, list[float]] = {}
    for res in results:
        if isinstance(res.get("bwMiB"), (int, float)):
            per_rep.setdefault(str(res["access"]), []).append(float(res["bwMiB"]))
    operations: dict[str, IorOperation] = {}
    first: dict[str, Any] | None = None
    for entry in summary:
        if not isinstance(entry, dict) or "operation" not in entry:
            raise _fail(source, f"summary entry without an operation: {entry!r:.80}")
        name = str(entry["operation"])
        what = f"summary of {name!r}"
        operations[name] = IorOperation(
            operation=name,
            bw_max_mib=_number(entry, "bwMaxMIB", source, what),
            bw_min_mib=_number(entry, "bwMinMIB", source, what),
            bw_mean_mib=_number(entry, "bwMeanMIB", source, what),
            bw_std_mib=_number(entry, "bwStdMIB", source, what),
            ops_max=_optional(entry, "OPsMax"),
            ops_mean=_optional(entry, "OPsMean"),
            mean_time_s=_optional(entry, "MeanTime"),
            repetitions_mib=tuple(per_rep.get(name, ())),
        )
        first = first or entry
    if first is None:
        raise _fail(source, "IOR summary without operations")
    missing = [op for op in require if op not in operations]
    if missing:
        raise _fail(source, f"IOR summary has no {' or '.join(missing)} operation (has "
                            f"{', '.join(operations)}): was IOR run without "
                            f"{' and '.join('-' + op[0] for op in missing)}?")
    what = "summary"
    return IorResult(
        api=str(first.get("API", "")),
        file_per_proc=bool(_number(first, "filePerProc", source, what)),
        num_tasks=int(_number(first, "numTasks", source, what)),
        block_size=int(_number(first, "blockSize", source, what)),
        transfer_size=int(_number(first, "transferSize", source, what)),
        segment_count=int(_optional(first, "segmentCount") or 1),
        repetitions=int(_optional(first, "repetitions") or 1),
        reorder_tasks=bool(_optional(first, "reorderTasks")),
        tasks_per_node=int(t) if (t := _optional(first, "tasksPerNode")) is not None else None,
        version=str(doc["Version"]) if "Version" in doc else None,
        command_line=str(doc["Command line"]) if "Command line" in doc else None,
        aggregate_mib=_optional(first, "xsizeMiB"),
        operations=operations,
    )


_TEST_ID_RE = re.compile(r"^TestID\s*:\s*(?P<id>\d+)", re.M)


@dataclass
class IorTextRun:
    """One IOR run of a text output that holds several (:func:`parse_ior_text_runs`)."""

    #: Line of the output where the run's banner is (1-based).
    line: int
    #: The run's ``Command line`` as IOR printed it (None if it printed none).
    command_line: str | None
    #: Its tests, as :func:`parse_ior_text_tests` gives them.
    tests: dict[int, dict[str, dict[str, float]]]


def _banner_lines(text: str) -> list[tuple[int, int]]:
    """(offset, line number) of every IOR banner in *text*."""
    return [(m.start(), text.count("\n", 0, m.start()) + 1) for m in _BANNER_RE.finditer(text)]


def parse_ior_text_runs(text: str, source: str = "<IOR output>") -> list[IorTextRun]:
    """Every IOR run of a text output, in order: runs appended to one file,
    each with its own banner and its own ``TestID`` 0, 1, ... Each run is read
    from its banner to the next banner only (its ``Summary of all tests``, its
    ``Max Write``/``Max Read`` lines), never mixed with another run's. An
    output without a banner is read as one run. A run that failed or is cut
    off raises :class:`ParseError` naming the run and its line."""
    banners = _banner_lines(text)
    if len(banners) <= 1:
        return [IorTextRun(banners[0][1] if banners else 1, _command_line(text),
                           _text_tests(text, source))]
    runs = []
    for i, (start, line) in enumerate(banners):
        end = banners[i + 1][0] if i + 1 < len(banners) else len(text)
        part = text[start:end]
        where = f"{source} (run {i + 1} of {len(banners)}, banner at line {line})"
        runs.append(IorTextRun(line, _command_line(part), _text_tests(part, where, line)))
    return runs


def _command_line(text: str) -> str | None:
    m = _COMMAND_RE.search(text)
    return m.group("cmd") if m else None


def _refuse_several_runs(text: str, source: str) -> None:
    banners = _banner_lines(text)
    if len(banners) > 1:
        lines = ", ".join(str(line) for _, line in banners[:6])
        more = ", ..." if len(banners) > 6 else ""
        raise _fail(source, f"{len(banners)} IOR runs appended in one output (banners at lines "
                            f"{lines}{more}; each numbers its tests from TestID 0): read it with "
                            "parse_ior_text_runs, which keeps each run apart")


def parse_ior_text_tests(text: str, source: str = "<IOR output>"
                         ) -> dict[int, dict[str, dict[str, float]]]:
    """Every test of IOR's text output of one run, keyed by its ``Test#``:
    operation → ``max``/``min``/``mean``/``stddev`` (MiB/s) from its rows of
    ``Summary of all tests``, plus ``max_line`` from the ``Max Write:``/``Max
    Read:`` lines printed (with ``-v``) in that test's own section (between its
    ``TestID`` line and the next). An output of several runs (several banners)
    is refused: read it with :func:`parse_ior_text_runs`."""
    _refuse_several_runs(text, source)
    return _text_tests(text, source)


def _text_tests(text: str, source: str, first_line: int = 1
                ) -> dict[int, dict[str, dict[str, float]]]:
    """The tests of one run's text; line numbers in messages count from
    *first_line* (the run's line in the whole output)."""
    base = first_line - 1
    errors = [e for e in ior_errors(text) if not e.startswith("WARNING")]
    if errors:
        raise _fail(source, f"IOR run failed: {errors[0]!r}")
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Summary of all tests"))
    except StopIteration:
        raise _fail(source, "no 'Summary of all tests' table: IOR output truncated or "
                            "not IOR output") from None
    if start + 1 >= len(lines) or not lines[start + 1].startswith("Operation"):
        raise _fail(source, "'Summary of all tests' without its header: output truncated")
    header = lines[start + 1].split()
    missing = [c for c in ("Max(MiB)", "Min(MiB)", "Mean(MiB)", "StdDev") if c not in header]
    if missing:
        raise _fail(source, f"line {base + start + 2}: summary header without "
                            f"{', '.join(missing)}")
    test_col = header.index("Test#") if "Test#" in header else None
    want = {"Max(MiB)": "max", "Min(MiB)": "min", "Mean(MiB)": "mean", "StdDev": "stddev"}
    tests: dict[int, dict[str, dict[str, float]]] = {}
    for number, line in enumerate(lines[start + 2:], start=base + start + 3):
        tokens = line.split()
        if not tokens or tokens[0] not in OPERATIONS:
            break
        if len(tokens) != len(header):
            raise _fail(source, f"line {number}: summary row cut off ({len(tokens)} of "
                                f"{len(header)} columns)")
        try:
            row = {key: float(tokens[header.index(col)]) for col, key in want.items()}
            test_id = int(tokens[test_col]) if test_col is not None else 0
        except ValueError:
            raise _fail(source, f"line {number}: not a number in summary row {line.strip()!r}") \
                from None
        ops = tests.setdefault(test_id, {})
        if tokens[0] in ops:
            raise _fail(source, f"line {number}: a second {tokens[0]} row for test {test_id}")
        ops[tokens[0]] = row
    if not tests:
        raise _fail(source, "'Summary of all tests' without rows: output truncated")
    # Max Write/Read lines belong to the test whose section (TestID line) precedes them.
    sections = [(m.start(), int(m.group("id"))) for m in _TEST_ID_RE.finditer(text)]
    for m in _MAX_RE.finditer(text):
        owner = [tid for pos, tid in sections if pos < m.start()]
        test_id = owner[-1] if owner else min(tests)
        op = m.group("op").lower()
        try:
            mib = float(m.group("mib"))
        except ValueError:
            line = text[m.start():].partition("\n")[0].strip()
            raise _fail(source, f"line {base + text.count(chr(10), 0, m.start()) + 1}: "
                                f"not a number "
                                f"in {line!r}") from None
        if test_id in tests and op in tests[test_id]:
            tests[test_id][op]["max_line"] = mib
    return tests


def parse_ior_text(text: str, source: str = "<IOR output>") -> dict[str, dict[str, float]]:
    """Read IOR's text output of one test: operation → ``max``/``min``/``mean``/
    ``stddev`` (MiB/s) from ``Summary of all tests``, plus ``max_line`` from the
    ``Max Write:``/``Max Read:`` lines (printed with ``-v`` only). An output of
    several tests is refused: read it with :func:`parse_ior_text_tests`; one
    of several runs, with :func:`parse_ior_text_runs`."""
    tests = parse_ior_text_tests(text, source)
    if len(tests) > 1:
        raise _fail(source, f"IOR output of {len(tests)} tests (Test# "
                            f"{', '.join(str(t) for t in tests)}): read it with "
                            "parse_ior_text_tests, which keeps each test apart")
    return next(iter(tests.values()))
