"""`hpcval vet` on a real lab that loses a node in the middle of the vetting: the
node's slurmd is killed while round 2 runs. The vetting exits 4 and names that
node UNMEASURED with srun's first line about it, the job goes on without it
(``salloc --no-kill``), and every pair without it is measured. About 1.5 minutes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcval.lab import cluster
from hpcval.lab.layout import default_state_dir
from hpcval.lab.state import LabState

from .conftest import lab_missing_reason

pytestmark = pytest.mark.lab

VICTIM = "lab-n5"


@pytest.fixture(scope="module")
def lab8() -> Iterator[None]:
    reason = lab_missing_reason()
    if reason:
        pytest.skip(reason)
    cluster.up(8, fabric="100m", log=lambda *_: None, file_server=False)
    try:
        yield
    finally:
        cluster.down(log=lambda *_: None)


def test_a_node_lost_during_the_vetting_is_named_and_the_rest_measured(
        lab8: None, tmp_path: Path) -> None:
    err = tmp_path / "vet.err"
    with err.open("w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "hpcval.cli", "vet", "--site", "lab",
                                 "--samples", "3", "--triad-n", "1000000"],
                                stdout=subprocess.PIPE, stderr=err_file, text=True,
                                env={**os.environ, "HPCVAL_VAR": str(tmp_path)})
        deadline = time.monotonic() + 600
        while "round 1/" not in err.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, err.read_text()
            time.sleep(0.2)
        time.sleep(2)  # round 2 is starting
        state = LabState.load(default_state_dir() / "state.json")
        assert state is not None
        os.kill(int(state.daemons[f"slurmd-{VICTIM}"]["pid"]), signal.SIGKILL)
        out, _ = proc.communicate(timeout=900)
    stderr = err.read_text()
    assert proc.returncode == 4, out + stderr
    result = json.loads(next(tmp_path.glob("lab/vet/*/vet.json")).read_text())
    assert list(result["lost"]) == [VICTIM], result["lost"]
    [entry] = [u for u in result["unmeasured"] if u["kind"] == "node"]
    assert entry["name"] == VICTIM and entry["cause"].startswith("lost during the vetting: ")
    assert VICTIM in entry["cause"] and "srun: error:" in entry["cause"]
    assert all(VICTIM in u["name"] for u in result["unmeasured"])
    assert f"{VICTIM:<12}" in out and "UNMEASURED" in out
    assert result["verdict"]["named_nodes"] == []
    # every planned pair without the lost node was measured
    planned = [tuple(p) for r in result["schedule"][:result["rounds"]] for p in r]
    measured = {tuple(k.split("|")) for k in result["pair_samples"]}
    assert [p for p in planned if VICTIM not in p and p not in measured] == []
    # the steps Slurm created, no more: the lab's squeue saw the job end, so
    # the count is that of the steps whose seconds were recorded
    assert result["steps"] == len(result["step_seconds"]) and not result["steps_refused"]
