"""Run ids: unique names of validation runs.

A run id is the UTC start time to the second plus six random hex digits
(``20261123T193500Z-3fa2c1``): it sorts by time, and two runs started in the
same second never share one. ``hpcval validate`` makes the id and hands it to
ReFrame as ``HPCVAL_RUN_ID``; a plain ``reframe -C site-configs/<site>/config.py``
run makes its own when the site config is read.
"""

from __future__ import annotations

import os
import re
import secrets
import time

ENV = "HPCVAL_RUN_ID"
RUN_ID = re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{6}")

_current: str | None = None


def new_run_id(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    return f"{stamp}-{secrets.token_hex(3)}"


def valid(run_id: str) -> bool:
    return bool(RUN_ID.fullmatch(run_id))


def current_run_id() -> str:
    """The id of the run this process belongs to: ``$HPCVAL_RUN_ID`` when it is
    a valid id, else one made once per process."""
    global _current
    if _current is None:
        given = os.environ.get(ENV, "")
        _current = given if valid(given) else new_run_id()
    return _current
