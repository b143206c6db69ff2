"""The GPU step of a vetting on a GPU partition: every GPU of every node at once,
one probe task per node (:mod:`hpcval.vet.gpu_probe`), one srun step."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcval.vet.measure import Progress, Settings, _save, _task_cause
from hpcval.vet.sitecfg import VetSite
from hpcval.vet.slurm import Allocation, by_task


def gpu_samples_of(outputs: dict[str, str], failures: list[str]
                   ) -> dict[str, dict[str, dict[str, list[float]]]]:
    """``{figure: {node: {gpu: samples}}}`` from each node's GPU probe output
    (:mod:`hpcval.vet.gpu_probe`); a node without its line, and every
    measurement a probe skipped, is added to *failures*."""
    from hpcval.vet.gpu_probe import MARKER as GPU_MARKER

    out: dict[str, dict[str, dict[str, list[float]]]] = {}
    for node, text in outputs.items():
        line = next((ln for ln in text.splitlines() if ln.startswith(GPU_MARKER)), None)
        if line is None:
            failures.append(f"{node}: GPU probe printed no result line")
            continue
        data = json.loads(line[len(GPU_MARKER):])
        failures += [f"{node}: {why}" for why in data.get("skipped", [])]
        for figure, per_gpu in data.get("figures", {}).items():
            out.setdefault(figure, {})[node] = per_gpu
    return out


def gpu_phase(alloc: Allocation, site: VetSite, nodes: Sequence[str], settings: Settings,
              workdir: Path, progress: Progress) -> tuple[dict[str, Any], list[str]]:
    """Every GPU of every node at once: one probe task per node, one srun step."""
    raw = workdir / "raw"
    probe = [sys.executable, "-m", "hpcval.vet.gpu_probe", f"--samples={settings.samples}"]
    t0 = time.monotonic()
    hosts = list(nodes)
    res = alloc.run("gpu-probe", hosts, probe, site.env, 10 * settings.step_timeout, workdir,
                    independent=True)
    _save(raw, "gpu-probe", res)
    failures: list[str] = []
    tasks = by_task(res.stdout)
    outputs = {}
    for i, n in enumerate(hosts):
        if i not in tasks:
            failures.append(f"{n}: GPU probe failed: {_task_cause(res, n, i)}")
            continue
        outputs[n] = "\n".join(tasks[i]) + "\n"
    samples = gpu_samples_of(outputs, failures)
    progress(f"GPU probe (BabelStream, gpubench) on {len(nodes)} nodes at once, one step: "
             f"{time.monotonic() - t0:.1f} s")
    return samples, failures
