"""The per-node findings of ``hpcval vet`` and ``hpcval health``: stable codes.

Every finding vet or health makes about a node (or a link, a switch, the
partition) carries a code from :data:`CODES`. A code is never renumbered nor
reused for another meaning: a site's runbooks, its drain-reason parsers and
its dashboards key on it (docs/vet.md, "Finding codes"). A code's
``severity`` is its default, which the site rules file may change
(:mod:`hpcval.vet.rules`):

- ``off``: the node must not run jobs; ``--drain`` drains it;
- ``suspect``: named (exit 1) and shown with its remedy, not drained;
- ``unknown``: something that should have been read was not; named, never a
  silent pass, not drained.

The ``HC-`` prefix is the one the health gate's drain reasons carried from the
start (``HC-TRIAD``, ``HC-SHMBW``, ``HC-MHZ``, ``HC-CPUSHARE``, ``HC-TUNING``);
those five keep their meaning.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SEVERITIES = ("off", "suspect", "unknown")


@dataclass(frozen=True)
class Code:
    code: str
    category: str
    severity: str
    meaning: str
    remedy: str


def _c(code: str, category: str, severity: str, meaning: str, remedy: str) -> Code:
    return Code(code, category, severity, meaning, remedy)


#: Fingerprint categories (iface: ``fingerprint`` of the probe line).
CATEGORIES = ("cpu", "memory", "firmware", "kernel", "network", "software", "mounts")

_UNI_REMEDY = {
    "cpu": "compare BIOS CPU settings (SMT, cores enabled) and microcode with a majority node; "
           "reseat or replace the CPU if a core or socket is missing",
    "memory": "check the DIMM population against a majority node (dmidecode -t memory, EDAC "
              "csrows); reseat or replace the missing or slow DIMM",
    "firmware": "flash the BIOS/BMC to the partition's majority version",
    "kernel": "boot the partition's kernel image and command line (check the boot loader "
              "entry and kernel modules)",
    "network": "update the HCA/NIC firmware or fix the link (rate, width, MTU, state) to match "
               "the majority; check the cable and switch port",
    "software": "redeploy the partition's software image (MPI, the Spack builds) on this node",
    "mounts": "mount the file systems jobs need (as on the majority) and check the client",
}

_LIST: list[Code] = [
    # performance figures (the vetting's and the gate's)
    _c("HC-TRIAD", "memory", "off", "memory triad bandwidth below the partition (an outlier) "
       "or its own history",
       "check DIMM population and speed (dmidecode), NUMA/BIOS memory settings, and other "
       "processes on the node"),
    _c("HC-SHMBW", "cpu", "off", "shared-memory PingPong 1 MiB below the partition",
       "check CPU binding and frequency, NUMA settings and other processes on the node"),
    _c("HC-MHZ", "cpu", "off", "CPU frequency below the partition",
       "check the CPU governor, power capping and thermal throttling (BMC sensor log)"),
    _c("HC-DGEMM", "cpu", "off", "DGEMM GFLOP/s below the partition",
       "check frequency throttling, cgroup CPU quotas, disabled cores and the BLAS in use"),
    _c("HC-GPU", "gpu", "off", "a GPU's figure (memory triad, host-device copies, GEMM, the "
       "node's NCCL all-reduce) below the partition's GPUs",
       "check the GPU's clocks, power and thermal limits, its PCIe link (width, speed) and "
       "nvidia-smi -q for errors"),
    _c("HC-CPUSHARE", "cpu", "off", "the gate's own CPU-share spin got less than its share: "
       "something else holds the node's CPUs",
       "find the process or cgroup quota holding the CPUs (top, systemd-cgtop)"),
    _c("HC-TUNING", "kernel", "off", "a host setting misses the site's host-expectations.yaml, "
       "or differs from what most of the partition has",
       "apply the site's tuning (host-expectations.yaml) to this node"),
    _c("HC-PAIR", "network", "off", "node-pair PingPong: the node is low in most of its pairs",
       "check the node's HCA/NIC, its cable and switch port (link rate, errors)"),
    _c("HC-LINK", "network", "suspect", "one node pair is low while both its ends are fine "
       "with other peers: the route between them",
       "check the links and switches between the two nodes"),
    _c("HC-SWITCH", "network", "off", "pairs leaving one switch are low, or most of its nodes "
       "are named: the switch",
       "check the switch and its uplinks"),
    _c("HC-REF", "partition", "suspect", "the partition's median (or its spread) is worse than "
       "the site's reference bound", "review the site's references or the partition"),
    _c("HC-LOST", "node", "unknown", "a node lost or unmeasured during the vetting (it died, "
       "srun failed on it, its probe printed nothing)",
       "check slurmd and the node's logs; vet it again (hpcval vet --gate NODE)"),
    # uniformity across the partition
    *[_c(f"HC-UNI-{cat.upper()}", cat, "off" if cat in ("cpu", "memory") else "suspect",
         f"a {cat} fingerprint value differs from the partition's majority", _UNI_REMEDY[cat])
      for cat in CATEGORIES],
    _c("HC-UNI-SPLIT", "partition", "suspect", "no value held by a majority of the partition "
       "for one fingerprint key (e.g. 2 against 2)",
       "decide the partition's intended value; allow both in vet-rules.yaml when intended"),
    _c("HC-UNI-UNKNOWN", "node", "unknown", "a fingerprint key the partition's majority has "
       "could not be read on this node",
       "check why the probe cannot read it (permissions, driver, dmidecode as root)"),
    # error counters since the node's previous stored reading
    _c("HC-ECC-UE", "memory", "off", "uncorrected memory (ECC) errors",
       "replace the DIMM EDAC names (edac-util -v); drain until replaced"),
    _c("HC-ECC-CE", "memory", "suspect", "corrected memory (ECC) errors at a rate far above "
       "the partition's", "watch the DIMM EDAC names; plan its replacement"),
    _c("HC-IB-SYMBOL", "network", "suspect", "InfiniBand symbol errors rising",
       "reseat or replace the cable/transceiver of the port; check the switch port"),
    _c("HC-IB-RECOVERY", "network", "suspect", "InfiniBand link error recovery rising",
       "check the cable and the switch port; replace the cable if it keeps rising"),
    _c("HC-IB-DOWNED", "network", "suspect", "InfiniBand link went down since the last reading",
       "check the cable, transceiver and switch port; the link flaps"),
    _c("HC-IB-RCVERR", "network", "suspect", "InfiniBand port receive errors rising",
       "check the cable and the peer port (perfquery, ibqueryerrors)"),
    _c("HC-NIC-ERR", "network", "suspect", "network interface rx/tx errors rising",
       "check the cable, the switch port and the NIC driver/firmware"),
    _c("HC-MCE", "cpu", "suspect", "machine-check events since the last reading",
       "read the machine-check log (rasdaemon, mcelog) and the BMC's event log"),
    _c("HC-CNT-UNKNOWN", "node", "unknown", "an error counter (or a whole counter source the "
       "partition's majority has, e.g. EDAC) that could not be read on this node",
       "check the driver (EDAC, ib_core) and the file permissions"),
]

CODES: dict[str, Code] = {c.code: c for c in _LIST}

#: vet/health figure (or culprit kind) -> its code
FIGURE_CODES = {"triad_bw": "HC-TRIAD", "shm_pingpong_bw_1MiB": "HC-SHMBW", "cpu_mhz": "HC-MHZ",
                "dgemm_gflops": "HC-DGEMM", "cpu_share": "HC-CPUSHARE", "tuning": "HC-TUNING",
                "pingpong_bw_1MiB": "HC-PAIR"}

#: counter kind (last element of a counter's name, with its source) -> code
COUNTER_CODES = {"ue": "HC-ECC-UE", "ce": "HC-ECC-CE", "ue_noinfo": "HC-ECC-UE",
                 "ce_noinfo": "HC-ECC-CE", "symbol_error": "HC-IB-SYMBOL",
                 "link_error_recovery": "HC-IB-RECOVERY", "link_downed": "HC-IB-DOWNED",
                 "port_rcv_errors": "HC-IB-RCVERR", "rx_errors": "HC-NIC-ERR",
                 "tx_errors": "HC-NIC-ERR", "count": "HC-MCE"}


def culprit_code(kind: str, figure: str) -> str:
    """The code of a vetting's culprit (:class:`hpcval.vet.model.Culprit`)."""
    if kind == "link":
        return "HC-LINK"
    if kind == "switch":
        return "HC-SWITCH"
    if kind == "gpu" or figure.startswith("gpu_"):
        return "HC-GPU"
    return FIGURE_CODES.get(figure, figure if figure in CODES else "HC-TUNING")


@dataclass
class Finding:
    """One finding about one node (or the partition, ``node`` empty)."""

    code: str
    node: str
    #: what was found, in one line
    text: str
    value: Any = None
    #: the majority value, the node's previous reading or the partition's median
    baseline: Any = None
    deviation: str = ""
    rule: str = ""
    severity: str = ""
    category: str = ""
    remedy: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        spec = CODES[self.code]  # KeyError: a code not registered is a bug
        self.severity = self.severity or spec.severity
        self.category = self.category or spec.category
        self.remedy = self.remedy or spec.remedy

    def line(self) -> str:
        """One line: code, severity, evidence, remedy."""
        return f"[{self.code}] {self.severity}: {self.text}; remedy: {self.remedy}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def table_markdown() -> str:
    """The codes table of docs/vet.md."""
    rows = ["| code | category | default | what it means | remedy |",
            "|------|----------|---------|---------------|--------|"]
    rows += [f"| `{c.code}` | {c.category} | {c.severity} | {c.meaning} | {c.remedy} |"
             for c in _LIST]
    return "\n".join(rows)
