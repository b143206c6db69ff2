"""GPU health audit: what ``nvidia-smi -q -x`` says about each GPU of a node,
judged against the site's expectations, beside the host tuning audit
(:mod:`hpcval.node.audit`).

The expectations are the ``gpu.*`` keys of the site's
``host-expectations.yaml``, in the host audit's own format (an exact value,
``{min: N}``/``{max: N}``, ``{one_of: [...]}`` or ``any``)::

    gpu.count: 4
    gpu.driver_version: "550.54.15"
    gpu.persistence_mode: Enabled
    gpu.ecc_mode: Enabled
    gpu.ecc_volatile_uncorrected: {max: 0}
    gpu.retired_pages_pending: {one_of: ["No", "N/A"]}
    gpu.remapped_rows_failure: "No"
    gpu.pcie_width_fraction: {min: 1}       # current width / max width
    gpu.clock_reasons: none                 # active reasons other than idle
    gpu.app_clocks_fraction: {min: 1}       # application clock / its default

What each catches:

* ``pcie_gen_fraction`` / ``pcie_width_fraction`` (current over the GPU's
  maximum): a link trained at x8 or gen 3 in a x16 gen 5 slot. A GPU that is
  idle trains its link *down* to save power (the recorded L40S and RTX 4070
  outputs show gen 1-2 of 4 at idle): a lower generation on an idle GPU
  (``gpu_idle`` active) is shown as information with that reason, not failed.
  The width does not change at idle, so a lower width always counts.
* ``clock_reasons``: clocks held down by a power cap, a thermal or hardware
  slowdown, or application clocks set low; ``gpu_idle`` is left out (an idle
  GPU always shows it).
* ``app_clocks_fraction``: application clocks set below their default
  (``nvidia-smi -ac``) slow every job on the GPU.
* ECC mode, volatile and aggregate error counts, retired pages (before
  Ampere), remapped rows (Ampere and later): memory errors and a GPU that
  needs a reset to retire or remap a page.
* persistence mode, driver and CUDA versions, GPU count and model: what a
  maintenance may change.

A value nvidia-smi does not report (``N/A``) is ``unknown`` and fails unless
the site expects ``any``: nothing passes silently. ``python -m
hpcval.node.gpu_audit --expect FILE`` runs ``nvidia-smi -q -x`` (or reads
``--xml FILE``) and prints the findings as a table or, with ``--json``, one
``HPCVAL-GPU-AUDIT`` line the ReFrame check parses.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from hpcval.core.errors import EnvironmentFault, ParseError, SiteError
from hpcval.node.expectations import describe, matches
from hpcval.node.expectations import load as load_expectations_file
from hpcval.parsers.nvidia_smi import Gpu, NvidiaSmiLog, parse_nvidia_smi_xml

PREFIX = "gpu."

#: Reasons left out of ``clock_reasons``: an idle GPU always shows ``gpu_idle``.
IDLE_REASONS = frozenset({"gpu_idle"})


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _fraction(current: float | None, maximum: float | None) -> str | None:
    if current is None or not maximum:
        return None
    return f"{current / maximum:.3g}"


def _reasons(gpu: Gpu) -> str | None:
    if not gpu.clock_reasons:
        return None
    active = [r for r in gpu.active_reasons() if r not in IDLE_REASONS]
    return ",".join(active) if active else "none"


def _retired(gpu: Gpu) -> str | None:
    if gpu.retired_pages_sbe is None and gpu.retired_pages_dbe is None:
        return None
    return str((gpu.retired_pages_sbe or 0) + (gpu.retired_pages_dbe or 0))


#: Node-wide settings: name → how to read it from the report.
NODE_SETTINGS: dict[str, Callable[[NvidiaSmiLog], str | None]] = {
    "gpu.count": lambda log: str(len(log.gpus)),
    "gpu.driver_version": lambda log: log.driver_version,
    "gpu.cuda_version": lambda log: log.cuda_version,
}

#: Per-GPU settings: name → how to read it from one GPU.
GPU_SETTINGS: dict[str, Callable[[Gpu], str | None]] = {
    "gpu.model": lambda g: g.name or None,
    "gpu.persistence_mode": lambda g: g.persistence_mode,
    "gpu.ecc_mode": lambda g: g.ecc_mode,
    "gpu.ecc_pending": lambda g: g.ecc_pending,
    "gpu.ecc_volatile_corrected": lambda g: _str(g.ecc_volatile_corrected),
    "gpu.ecc_volatile_uncorrected": lambda g: _str(g.ecc_volatile_uncorrected),
    "gpu.ecc_aggregate_uncorrected": lambda g: _str(g.ecc_aggregate_uncorrected),
    "gpu.retired_pages": _retired,
    "gpu.retired_pages_pending": lambda g: g.retired_pages_pending,
    "gpu.remapped_rows_uncorrected": lambda g: _str(g.remapped_rows_uncorrected),
    "gpu.remapped_rows_pending": lambda g: g.remapped_rows_pending,
    "gpu.remapped_rows_failure": lambda g: g.remapped_rows_failure,
    "gpu.pcie_gen": lambda g: _str(g.pcie_gen_current),
    "gpu.pcie_width": lambda g: _str(g.pcie_width_current),
    "gpu.pcie_gen_fraction": lambda g: _fraction(g.pcie_gen_current, g.pcie_gen_max),
    "gpu.pcie_width_fraction": lambda g: _fraction(g.pcie_width_current, g.pcie_width_max),
    "gpu.pcie_replay_counter": lambda g: _str(g.pcie_replay_counter),
    "gpu.clock_reasons": _reasons,
    "gpu.app_clocks_fraction": lambda g: _fraction(g.clocks_mhz.get("app_graphics"),
                                                   g.clocks_mhz.get("default_app_graphics")),
    "gpu.sm_clock_mhz": lambda g: _str(g.clocks_mhz.get("sm")),
    "gpu.memory_total_mib": lambda g: _str(g.memory_total_mib),
}

#: Every ``gpu.*`` key a ``host-expectations.yaml`` may hold.
SETTINGS: tuple[str, ...] = (*NODE_SETTINGS, *GPU_SETTINGS)


@dataclass(frozen=True)
class GpuFinding:
    """One setting of the node (``gpu`` None) or of one GPU: found, expected,
    verdict (``ok``, ``mismatch``, ``unknown``, ``info``) and why, where the
    verdict needs a reason."""

    setting: str
    gpu: int | None
    bus_id: str
    found: str | None
    expected: str
    status: str
    note: str = ""

    def line(self) -> str:
        where = "node" if self.gpu is None else f"GPU {self.gpu} ({self.bus_id})"
        found = "unknown (not reported)" if self.found is None else repr(self.found)
        note = f" [{self.note}]" if self.note else ""
        return f"{where}: {self.setting}: found {found}, expected {self.expected}{note}"


def gpu_expectations(expectations: dict[str, Any]) -> dict[str, Any]:
    """The ``gpu.*`` keys of a site's host expectations."""
    return {k: v for k, v in expectations.items() if k.startswith(PREFIX)}


def _judge(name: str, found: str | None, expectations: dict[str, Any]) -> tuple[str, str]:
    if name not in expectations:
        return "(no expectation)", "info"
    expect = expectations[name]
    if expect == "any":
        return "any", "info"
    if found is None:
        return describe(expect), "unknown"
    return describe(expect), "ok" if matches(found, expect) else "mismatch"


def _idle(gpu: Gpu) -> bool:
    return bool(gpu.clock_reasons.get("gpu_idle"))


def audit_gpus(expectations: dict[str, Any], log: NvidiaSmiLog) -> list[GpuFinding]:
    """Judge every GPU setting of one node's ``nvidia-smi -q -x`` report."""
    expectations = gpu_expectations(expectations)
    findings = []
    for name, read in NODE_SETTINGS.items():
        found = read(log)
        expected, status = _judge(name, found, expectations)
        findings.append(GpuFinding(name, None, "", found, expected, status))
    for gpu in log.gpus:
        for name, read in GPU_SETTINGS.items():
            found = read(gpu)
            expected, status = _judge(name, found, expectations)
            note = ""
            if (name in ("gpu.pcie_gen", "gpu.pcie_gen_fraction") and status == "mismatch"
                    and _idle(gpu)):
                status = "info"
                note = ("GPU idle: links train down to save power; the maximum is gen "
                        f"{gpu.pcie_gen_max}; audit under load to judge the generation")
            findings.append(GpuFinding(name, gpu.index, gpu.bus_id, found, expected, status,
                                       note))
    return findings


#: Keys proposed as the value every GPU of the node shows.
_SAME = ("gpu.model", "gpu.persistence_mode", "gpu.ecc_mode", "gpu.ecc_pending",
         "gpu.memory_total_mib")
#: Error counts: no more than the node shows today (a new error fails).
_COUNTS = ("gpu.ecc_volatile_uncorrected", "gpu.ecc_aggregate_uncorrected",
           "gpu.retired_pages", "gpu.remapped_rows_uncorrected")
#: Yes/No states that need a GPU reset when "Yes": always "No".
_NO = ("gpu.retired_pages_pending", "gpu.remapped_rows_pending", "gpu.remapped_rows_failure")
#: Current over maximum: the full link, the default application clocks.
_FULL = ("gpu.pcie_gen_fraction", "gpu.pcie_width_fraction", "gpu.app_clocks_fraction")


def propose_expectations(log: NvidiaSmiLog) -> dict[str, Any]:
    """``gpu.*`` expectations for a node like this one, to review and put in the
    site's ``host-expectations.yaml``: versions and count as found, the model,
    persistence, ECC and pending ECC modes and memory where every GPU agrees
    (a pending mode unlike the current one waits for a reset), error counts
    no higher than today's, no pending retirement or remap, full PCIe link and
    default application clocks, no clock reason. A value no GPU reports
    (``N/A`` on this model) is proposed as ``any``, so it does not fail as
    unknown; values that vary with load (current clocks, replay counter,
    corrected errors) are left out and shown as information."""
    out: dict[str, Any] = {"gpu.count": len(log.gpus)}
    for key, value in (("gpu.driver_version", log.driver_version),
                       ("gpu.cuda_version", log.cuda_version)):
        out[key] = value if value is not None else "any"

    def found(key: str) -> list[str | None]:
        return [GPU_SETTINGS[key](g) for g in log.gpus]

    for key in (*_SAME, *_COUNTS, *_NO, *_FULL, "gpu.clock_reasons"):
        values = found(key)
        known = [v for v in values if v is not None]
        if not known:
            out[key] = "any"
        elif key in _SAME:
            out[key] = known[0] if len(set(values)) == 1 else {"one_of": sorted(set(known))}
        elif key in _COUNTS:
            out[key] = {"max": max(int(v) for v in known)}
        elif key in _NO:
            out[key] = "No"
        elif key in _FULL:
            out[key] = {"min": 1}
        else:
            out[key] = "none"
    return out


def failures(findings: list[GpuFinding]) -> list[GpuFinding]:
    return [f for f in findings if f.status in ("mismatch", "unknown")]


MARKER = "HPCVAL-GPU-AUDIT "


def parse_gpu_audit_output(text: str, source: str = "GPU audit output") -> list[GpuFinding]:
    """The findings a ``--json`` GPU audit printed."""
    for line in text.splitlines():
        if line.startswith(MARKER):
            try:
                return [GpuFinding(**f) for f in json.loads(line[len(MARKER):])]
            except (ValueError, TypeError) as err:
                raise ParseError(f"{source}: malformed GPU audit line: {err}") from None
    raise ParseError(f"{source}: no '{MARKER.strip()}' line: the GPU audit did not run "
                     "(see the job's standard error)")


def query_nvidia_smi(timeout: float = 60) -> str:
    """``nvidia-smi -q -x`` of this node; :class:`EnvironmentFault` where it cannot run."""
    program = shutil.which("nvidia-smi")
    if program is None:
        raise EnvironmentFault("nvidia-smi not found on PATH: not a node with NVIDIA GPUs (or "
                               "the driver is not installed)")
    try:
        done = subprocess.run([program, "-q", "-x"], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError) as err:
        raise EnvironmentFault(f"{program} -q -x did not run: {err}") from None
    if done.returncode != 0:
        first = (done.stdout + done.stderr).strip().splitlines()[:1]
        raise EnvironmentFault(f"{program} -q -x exited with {done.returncode}: "
                        f"{first[0] if first else 'no output'}")
    return done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hpcval.node.gpu_audit",
                                     description="Audit this node's NVIDIA GPUs.")
    parser.add_argument("--expect", help="host expectations YAML (gpu.* keys)")
    parser.add_argument("--xml", help="read this nvidia-smi -q -x report instead of running it")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--propose", action="store_true",
                        help="print gpu.* expectations for a node like this one (YAML, to "
                        "review and add to host-expectations.yaml) instead of auditing")
    args = parser.parse_args(argv)
    if not args.propose and not args.expect:
        parser.error("--expect FILE is needed to audit (or --propose)")
    try:
        # the gpu.* keys are checked here; the host audit checks the others
        expectations = (load_expectations_file(args.expect, {"GPU": SETTINGS}, only=PREFIX)
                        if args.expect else {})
        if args.xml:
            source = args.xml
            try:
                text = Path(args.xml).read_text(errors="replace")
            except OSError as err:
                print(f"hpcval gpu audit: error: {args.xml}: {err.strerror}", file=sys.stderr)
                return 2
        else:
            source, text = "nvidia-smi -q -x", query_nvidia_smi()
        log = parse_nvidia_smi_xml(text, source)
        if args.propose:
            print(f"# gpu.* expectations proposed from {source} by python -m hpcval.node.gpu_audit "
                  "--propose:\n# review, then add to the site's host-expectations.yaml "
                  "(docs/checks.md, gpu_health_audit_check)")
            print(yaml.safe_dump(propose_expectations(log), sort_keys=False,
                                 default_flow_style=None), end="")
            return 0
        findings = audit_gpus(expectations, log)
    except (SiteError, EnvironmentFault, ParseError) as err:
        # wrong expectations: 2; no nvidia-smi, or a report it cannot have printed: 3
        print(f"hpcval gpu audit: error: {err}", file=sys.stderr)
        return 2 if isinstance(err, SiteError) else 3
    if args.json:
        print(MARKER + json.dumps([asdict(f) for f in findings]))
    else:
        for f in findings:
            print(f"{f.status:9} {f.line()}")
    return 1 if failures(findings) else 0


if __name__ == "__main__":
    sys.exit(main())
