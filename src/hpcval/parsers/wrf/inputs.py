"""Input data manifests: the sha256 of every file a WRF data package
installs, checked before a run links the files in."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from hpcval.core.errors import ParseError


def sha256_file(path: str | Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


#: Manifest a data package writes into its prefix: ``<sha256>  <relative path>``
#: per file, computed at install time from the tarball whose published sha256
#: Spack has verified.
MANIFEST = "hpcval-sha256.txt"


def read_manifest(data_dir: str | Path) -> dict[str, str]:
    """``{relative path: sha256}`` from a data directory's manifest."""
    path = Path(data_dir) / MANIFEST
    try:
        lines = path.read_text().splitlines()
    except OSError as err:
        raise ParseError(
            f"{path}: cannot read the input manifest ({err.strerror}); reinstall the data "
            "package so that its inputs can be verified"
        ) from None
    manifest: dict[str, str] = {}
    for n, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[0]):
            raise ParseError(f"{path}:{n}: not '<sha256>  <file>': {line!r}")
        manifest[parts[1].strip()] = parts[0]
    if not manifest:
        raise ParseError(f"{path}: the input manifest lists no file")
    return manifest


def verify_inputs(data_dir: str | Path, names: list[str] | None = None) -> dict[str, str]:
    """Check the data directory's files against its manifest (all of them, or
    ``names``); :class:`ParseError` naming each missing or corrupt file."""
    data_dir = Path(data_dir)
    manifest = read_manifest(data_dir)
    problems: list[str] = []
    for name in names if names is not None else sorted(manifest):
        if name not in manifest:
            problems.append(f"{name}: not in the manifest")
            continue
        path = data_dir / name
        if not path.is_file():
            problems.append(f"{name}: missing")
            continue
        got = sha256_file(path)
        if got != manifest[name]:
            problems.append(f"{name}: sha256 {got} != {manifest[name]} (corrupt or truncated)")
    if problems:
        raise ParseError(f"inputs in {data_dir} fail verification: " + "; ".join(problems))
    return manifest
