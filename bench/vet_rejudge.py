#!/usr/bin/env python3
"""Judge stored vettings again from their samples with the current code.

    .venv/bin/python bench/vet_rejudge.py var/lab/vet/<id> ...

One Markdown row per vetting: nodes, what it named when it ran, what the
current judging names. Used in docs/vet.md when the judging changed after a
lab run (the samples are the evidence; the verdict is a function of them).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hpcval.vet.run import judge_recorded


def main(paths: list[str]) -> None:
    print("| id | nodes | named when run | named now | links now |")
    print("|---|---|---|---|---|")
    for p in paths:
        path = Path(p)
        result = json.loads((path / "vet.json" if path.is_dir() else path).read_text())
        verdict = judge_recorded(result)
        links = [c.name for c in verdict.culprits if c.kind == "link"]
        print(f"| {result['id']} | {len(result['verdict']['nodes'])} | "
              f"{','.join(result['verdict']['named_nodes']) or '-'} | "
              f"{','.join(verdict.named_nodes) or '-'} | {','.join(links) or '-'} |")


if __name__ == "__main__":
    main(sys.argv[1:])
