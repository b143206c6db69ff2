"""DGEMM in a vetting (``hpcval vet --dgemm``): one step over every node at once after
the per-node phase of :mod:`hpcval.vet.measure`, its figure ``dgemm_gflops`` per node
(:mod:`hpcval.node.dgemm`, run through ``python -m hpcval.vet.probe --dgemm``)."""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

from hpcval.node import sizing
from hpcval.vet import measure
from hpcval.vet.measure import NodeSamples, Progress, Settings
from hpcval.vet.sitecfg import VetSite
from hpcval.vet.slurm import Allocation


def dgemm_size(site: VetSite, settings: Settings, per_node: int | None,
               shared_by: int = 1) -> sizing.Size:
    """The per-node DGEMM's order: :func:`hpcval.node.sizing.dgemm` (budget quick) for
    the partition's node, its CPUs split over the nodes sharing a machine, within
    half the memory available per node; ``dgemm_n`` in the settings overrides it
    (refused past that memory, exit 2)."""
    node = replace(site.node, mem_bytes=per_node) if per_node else site.node
    if shared_by > 1 and node.cpus:
        node = replace(node, cpus=max(1, node.cpus // shared_by))
    if settings.dgemm_n is None:
        try:
            return sizing.dgemm(node, "quick", None, settings.samples)
        except sizing.SizingError as err:
            raise sizing.SizingError(f"per-node DGEMM: {err}; exit 2") from None
    n = settings.dgemm_n
    if per_node and 24 * n * n > per_node * sizing.MEMORY_SHARE:
        raise sizing.SizingError(
            f"per-node DGEMM: --dgemm-n {n}: three matrices of {sizing._size(8 * n * n)} "
            f"exceed {sizing.MEMORY_SHARE:.0%} of the {sizing._size(per_node)} per node; "
            "give a smaller --dgemm-n; exit 2")
    return sizing.Size({"n": n}, f"n = {n:,}", "set by the caller", "quick", 0, 24 * n * n)


def dgemm_step(alloc: Allocation, site: VetSite, hosts: list[str], settings: Settings,
               workdir: Path, out: NodeSamples, progress: Progress) -> None:
    """DGEMM on every node at once, one step (``dgemm_gflops``, into ``out``); nodes
    sharing a machine split its CPUs between their BLAS threads."""
    shared_by = out.shared_by
    size = dgemm_size(site, settings, out.per_node, shared_by)
    out.sizes["dgemm_gflops"] = {"size": size.summary, "reason": size.reason,
                                 "memory": out.memory_where,
                                 "n": str(size.params["n"])}
    out.dgemm_cmd = [sys.executable, "-m", "hpcval.vet.probe", f"--samples={settings.samples}",
                     "--dgemm", f"--dgemm-n={size.params['n']}"]
    out.dgemm_env = dict(site.env)
    if shared_by > 1 and site.node.cpus:
        threads = str(max(1, site.node.cpus // shared_by))
        out.dgemm_env.update(OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads,
                             MKL_NUM_THREADS=threads)
        out.sizes["dgemm_gflops"]["threads"] = threads
    progress(f"DGEMM size: {size.summary} ({size.reason})")
    t0 = time.monotonic()
    res = alloc.run("dgemm", hosts, out.dgemm_cmd, out.dgemm_env,
                    settings.step_timeout * settings.samples, workdir, independent=True)
    measure._save(workdir / "raw", "dgemm", res)
    lines = measure._task_lines(res, hosts)
    got: dict[str, list[float]] = {}
    for i, n in enumerate(hosts):
        if n not in lines:
            out.unmeasured.setdefault(n, []).append(f"dgemm: {measure._task_cause(res, n, i)}")
            continue
        for err in lines[n]["errors"]:
            out.unmeasured.setdefault(n, []).append(err)
        if not lines[n]["errors"]:
            got[n] = lines[n]["dgemm"]["gflops"]
    out.figures["dgemm_gflops"] = got
    progress(f"DGEMM on {len(hosts)} nodes at once, {settings.samples} samples each, one "
             f"step: {time.monotonic() - t0:.1f} s")
