"""What an earlier run left behind, settled under the site lock before a run
starts: a run whose hpcval died without cleaning up (its processes stopped,
the run marked ``orphaned``), and ReFrame's start log moved beside the run's
own log.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from pathlib import Path
from typing import IO

from hpcval.run import procs
from hpcval.site import Site


def keep_reframe_start_log(site: Site, run_id: str, since: float) -> Path | None:
    """ReFrame logs its start (reading the site config) to ``rfm-*.log`` in
    its temp directory, before the site config's own log takes over, and
    leaves it there; ``hpcval validate`` points that directory at the run's
    log directory (:func:`hpcval.core.paths.start_log_environment`), where
    the file is renamed ``<run id>.reframe-start.log`` (the system's temp
    directory is looked in too, where the logs could not be made). Its file is
    the one made since *since* that names this site's config (one validation
    of a site runs at a time: the site lock)."""
    import tempfile

    needle = f"Loading configuration file: '{site.config}'"
    logs = site.run_log(run_id).parent
    for path in [*logs.glob("rfm-*.log"), *Path(tempfile.gettempdir()).glob("rfm-*.log")]:
        try:
            if path.stat().st_mtime < since - 1 or needle not in path.read_text(
                    errors="replace")[:20000]:
                continue
            dest = site.run_log(run_id).with_name(f"{run_id}.reframe-start.log")
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(path), dest)
            return dest
        except OSError:
            continue
    return None

def settle_earlier_run(site: Site, err: IO[str] = sys.stderr, wait: float = 0.0) -> None:
    """Under the site lock: a run recorded in ``var/<site>/run.json`` is one
    whose hpcval died (SIGKILL, an out-of-memory kill) without cleaning up.
    Its processes still alive (ReFrame, launchers, ranks: found by run id and
    process group) are stopped, so that no two runs share the machine, and
    the run is marked ``orphaned`` (never judged, never a baseline). With
    *wait* seconds (``validate --earlier-run wait``), they are first given
    that long to end on their own. Says so."""
    import socket

    from hpcval.run import verdicts

    path = site.var / procs.RUN_RECORD
    rec = procs.read_run_record(path)
    if rec is None:
        return
    old = str(rec["run_id"])
    host = str(rec.get("host", ""))
    if host and host != socket.gethostname():
        print(f"hpcval: warning: {path}: run {old} of an hpcval on {host} ended without "
              "cleaning up; its processes there cannot be seen from here", file=err,
              flush=True)
        left: list[int] = []
    else:
        pgid = rec.get("pgid")
        group = pgid if isinstance(pgid, int) else None
        alive = procs.run_processes(old, group)
        if alive and wait > 0:
            print(f"hpcval: run {old} of an hpcval that died (pid "
                  f"{rec.get('hpcval_pid', '?')}) still has {len(alive)} process(es) running: "
                  f"waiting up to {wait:g} s for them to end (--lock-timeout)", file=err,
                  flush=True)
            deadline = time.monotonic() + wait
            while alive and time.monotonic() < deadline:
                time.sleep(0.5)
                alive = procs.run_processes(old, group)
            if not alive:
                print(f"hpcval: run {old}: its processes ended on their own", file=err,
                      flush=True)
        left = procs.stop_run(old, group, site.stage_dir(old)) if alive else []
    done = verdicts.mark_orphaned(site, old)
    alive = (f"stopped its {len(left)} process(es) still running "
             f"(pids {', '.join(map(str, left[:8]))}{' ...' if len(left) > 8 else ''}); "
             if left else "none of its processes was left; ")
    print(f"hpcval: run {old} outlived its hpcval (pid {rec.get('hpcval_pid', '?')}, killed "
          f"without cleaning up): {alive}{done}", file=err, flush=True)
    with contextlib.suppress(OSError):
        path.unlink()

