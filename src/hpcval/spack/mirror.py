"""``hpcval spack mirror``: the source mirror an offline ``spack install`` reads, made
from clones of the source repositories, each archive checked against Spack's package.

Spack verifies every archive against the ``sha256`` its ``package.py`` declares, so any
byte-identical copy of the published archive will do. A GitHub tag archive is
``git archive --prefix=<repository>-<tag without a leading v>/ <tag>`` compressed with
``gzip -n``: :data:`RECIPES` says, per package, which repository, tag and prefix
reproduce it. This module

* reads what the environment pins from its lock (every node that is not external and
  has code to fetch: name, version, namespace, the patches it applies);
* reads each package's ``sha256`` (and URL) from its ``package.py`` (the builtin
  repository at the pinned commit, or hpcval's own ``spack-repo``) without running
  Spack (:func:`package_facts`, Python's ``ast``);
* makes each archive :data:`RECIPES` knows from a clone under the sources directory
  and puts it in the mirror only when its sha256 is the package's (a wrong one is
  named with both sums and left out);
* lists every other source with the URL to fetch it from on a machine with network.

The mirror layout is Spack's: ``_source-cache/archive/<sha[:2]>/<sha256>.<ext>``, and
``<name>/<name>-<version>.tar.gz`` for a package version without a checksum (STREAM).
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcval.core.errors import EnvironmentFault, InputError
from hpcval.core.paths import project_root
from hpcval.spack.environments import read_lock

#: The environment variable naming the directory of source clones (``--sources``).
SOURCES_ENV = "HPCVAL_SPACK_SOURCES"
#: Where hpcval's own package repository lives in the checkout.
HPCVAL_REPO = Path("spack-repo") / "spack_repo" / "hpcval"


#: The commit of jeffhammond/STREAM its archive is made from (the default branch's head
#: on 2025-02-17, "docs: update README"; Spack's ``stream@5.10`` clones whatever the head is).
STREAM_COMMIT = "6703f7504a38a8da96b353cadafa64d3c2d7a2d3"
#: The mirror's manifest: ``sha256sum`` lines (``<sha256>  <path in the mirror>``) for every
#: archive ``hpcval spack mirror`` put there, the checksum-less ones (STREAM) included.
MANIFEST = "SHA256SUMS"


@dataclass(frozen=True)
class Recipe:
    """How a package's published archive is reproduced from its git repository."""

    #: ``owner/name`` on GitHub; the clone is ``<sources>/<name>``.
    repository: str
    #: The tag (``{version}`` is the version); empty: the default branch (``HEAD``).
    tag: str
    #: The archive's top directory (``{version}``), with a trailing slash.
    prefix: str

    @property
    def clone_name(self) -> str:
        return self.repository.split("/", 1)[1]

    def url(self) -> str:
        return f"https://github.com/{self.repository}.git"


#: Packages whose published archive a git clone reproduces byte for byte (checked:
#: the sha256 of each is Spack's).
RECIPES: dict[str, Recipe] = {
    "compiler-wrapper": Recipe("spack/compiler-wrapper", "v{version}",
                               "compiler-wrapper-{version}/"),
    "intel-mpi-benchmarks": Recipe("intel/mpi-benchmarks", "IMB-v{version}",
                                   "mpi-benchmarks-IMB-v{version}/"),
    "ior": Recipe("hpc/ior", "{version}", "ior-{version}/"),
    # Spack's only STREAM version clones the default branch (no tag, no checksum): the
    # archive is made from this commit, so that its bytes, and the manifest's sha256 of
    # them, are the same wherever it is made
    "stream": Recipe("jeffhammond/STREAM", STREAM_COMMIT, "stream-{version}/"),
}

#: Why a pinned package cannot be made from a repository (its published archive is
#: needed: fetch it on a machine with network).
NOT_FROM_GIT: dict[str, str] = {
    "osu-micro-benchmarks": "released only as a tarball from mvapich.cse.ohio-state.edu "
                            "(no public repository)",
    "hpcg": "the release tarball is not the archive of the HPCG-release-3-1-0 tag "
            "(another sha256)",
}


@dataclass
class PackageFacts:
    """What a ``package.py`` declares that a mirror needs."""

    path: Path
    url: str = ""
    git: str = ""
    has_code: bool = True
    url_for_version: bool = False
    #: version -> keyword arguments of its ``version(...)`` (``sha256``, ``url``, ...)
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    #: sha256 -> URL of every ``patch("<url>", sha256=...)``
    patches: dict[str, str] = field(default_factory=dict)
    #: sha256 -> the ``when=`` of each ``patch(...)`` of it ("" for none)
    patch_when: dict[str, list[str]] = field(default_factory=dict)


def _const(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


def package_facts(package_py: str | Path) -> PackageFacts:
    """Parse a ``package.py`` (without running it): class ``url``/``git``/``has_code``,
    every ``version("X", sha256=...)`` and every ``patch("<url>", sha256=...)``."""
    path = Path(package_py)
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError) as err:
        raise InputError(f"{path}: cannot read the package ({err})") from None
    facts = PackageFacts(path)
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        if any(getattr(b, "id", "") == "BundlePackage" for b in cls.bases):
            facts.has_code = False
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                name = getattr(stmt.targets[0], "id", "")
                if name in ("url", "git") and _const(stmt.value) is not None:
                    setattr(facts, name, _const(stmt.value))
                if name == "has_code" and isinstance(stmt.value, ast.Constant):
                    facts.has_code = bool(stmt.value.value)
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "url_for_version":
                facts.url_for_version = True
        for call in (n for n in ast.walk(cls) if isinstance(n, ast.Call)):
            func = getattr(call.func, "id", "")
            first = _const(call.args[0]) if call.args else None
            if first is None:
                continue
            kwargs = {k.arg: _const(k.value) or "" for k in call.keywords if k.arg}
            if func == "version":
                facts.versions[first] = kwargs
            elif func == "patch" and "://" in first and kwargs.get("sha256"):
                facts.patches[kwargs["sha256"]] = first
                facts.patch_when.setdefault(kwargs["sha256"], []).append(kwargs.get("when", ""))
    return facts


def version_url(facts: PackageFacts, version: str) -> str:
    """The URL Spack fetches *version* from: the version's own ``url=``, else the
    class ``url`` with its version replaced (Spack's substitution for the common
    case); where ``url_for_version`` computes it, that is said."""
    own = facts.versions.get(version, {}).get("url")
    if own:
        return own
    if facts.url_for_version:
        return f"(computed by url_for_version in {facts.path}; `spack fetch` on a machine " \
               "with network)"
    if not facts.url:
        return facts.git or f"(no url in {facts.path})"
    name = facts.url.rsplit("/", 1)[-1]
    found = re.findall(r"\d+(?:\.\d+)+(?:-\d+)?", name)
    return facts.url.replace(found[-1], version) if found else facts.url


@dataclass(frozen=True)
class Source:
    """One archive an install of the environment fetches."""

    package: str
    version: str
    sha256: str | None
    url: str
    package_py: Path
    #: ``archive``: the package's source; ``patch``: a patch it applies
    kind: str = "archive"

    @property
    def label(self) -> str:
        return f"{self.package}@{self.version}" + (" (patch)" if self.kind == "patch" else "")

    def mirror_path(self) -> str:
        """Where Spack looks for it in a mirror."""
        if self.sha256 and self.kind == "patch":  # not expanded: no extension
            return f"_source-cache/archive/{self.sha256[:2]}/{self.sha256}"
        if self.sha256:
            return f"_source-cache/archive/{self.sha256[:2]}/{self.sha256}.{_extension(self.url)}"
        return f"{self.package}/{self.package}-{self.version}.tar.gz"


def _extension(url: str) -> str:
    for ext in ("tar.gz", "tar.bz2", "tar.xz", "tgz", "zip", "tar"):
        if url.split("?", 1)[0].endswith("." + ext):
            return ext
    return "tar.gz"


def package_dirs(builtin: Path, root: Path) -> dict[str, Path]:
    """Namespace -> ``packages`` directory: the builtin repository and hpcval's."""
    return {"builtin": builtin / "packages", "hpcval": root / HPCVAL_REPO / "packages"}


def environment_sources(env_dir: str | Path, builtin: str | Path,
                        root: str | Path | None = None) -> list[Source]:
    """Every archive and patch an install of the environment's lock fetches, with the
    sha256 its package.py declares. Externals, packages without code and hpcval's
    proxies (built from the checkout) fetch nothing."""
    lock = read_lock(env_dir)
    dirs = package_dirs(Path(builtin), Path(root or project_root()))
    if not dirs["builtin"].is_dir():
        raise InputError(f"--builtin {builtin}: no packages/ directory: give the builtin "
                         "repository (<spack-packages>/repos/spack_repo/builtin)")
    found: dict[tuple[str, str, str], Source] = {}
    for node in lock.get("concrete_specs", {}).values():
        if node.get("external"):
            continue
        name, version = node["name"], str(node["version"])
        namespace = node.get("namespace", "builtin")
        package_py = dirs.get(namespace, dirs["builtin"]) / name.replace("-", "_") / "package.py"
        if not package_py.is_file():
            raise InputError(f"{package_py}: missing: {name} of {env_dir}/spack.lock comes from "
                             f"the {namespace} repository; is --builtin the pinned one?")
        facts = package_facts(package_py)
        kwargs = facts.versions.get(version, {})
        if not facts.has_code or (namespace == "hpcval" and not facts.url and not kwargs):
            continue
        # a version without a checksum is a git clone (Spack's STREAM)
        url = facts.git if not kwargs.get("sha256") and facts.git else \
            version_url(facts, version)
        key = (name, version, "archive")
        found.setdefault(key, Source(name, version, kwargs.get("sha256") or None, url,
                                     package_py))
        for digest in node.get("patches") or (node.get("parameters") or {}).get("patches") or []:
            if digest in facts.patches:
                found.setdefault((name, digest, "patch"), Source(
                    name, version, digest, facts.patches[digest], package_py, "patch"))
    return sorted(found.values(), key=lambda s: (s.package, s.kind, s.version))


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def archive_problem(path: str | Path, expected: str) -> str | None:
    """None when *path* has the sha256 *expected*; else one line naming the file and
    both sums (a truncated or wrong archive)."""
    actual = sha256_of(path)
    if actual == expected:
        return None
    return (f"{path}: sha256 {actual}, expected {expected} ({os.path.getsize(path)} bytes: "
            "truncated or not the published archive): remake it with `hpcval spack mirror`")


def git_archive(clone: Path, ref: str, prefix: str, into: Path) -> str:
    """``git archive --format=tar --prefix=<prefix> <ref> | gzip -n`` into *into*;
    returns the commit archived. :class:`EnvironmentFault` when git fails."""
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--verify", "-q",
                             f"{ref}^{{commit}}"], capture_output=True, text=True, check=False)
    if commit.returncode != 0:
        raise EnvironmentFault(f"{clone}: no {ref} in this clone: fetch its tags "
                               f"(`git -C {clone} fetch --tags`)")
    with open(into, "wb") as out:
        archive = subprocess.Popen(["git", "-C", str(clone), "archive", "--format=tar",
                                    f"--prefix={prefix}", ref], stdout=subprocess.PIPE)
        gzip = subprocess.run(["gzip", "-n"], stdin=archive.stdout, stdout=out, check=False)
        assert archive.stdout is not None
        archive.stdout.close()
        if archive.wait() != 0 or gzip.returncode != 0:
            raise EnvironmentFault(f"{clone}: git archive {ref} | gzip -n failed")
    return commit.stdout.strip()


@dataclass
class MirrorResult:
    """What :func:`make_mirror` did, one line each."""

    made: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)
    missing_clones: list[str] = field(default_factory=list)
    need_network: list[str] = field(default_factory=list)
    #: path in the mirror -> sha256 of every archive made or verified (the manifest's lines)
    sums: dict[str, str] = field(default_factory=dict)


def make_mirror(sources: list[Source], mirror: Path, clones: Path,
                recipes: dict[str, Recipe] | None = None) -> MirrorResult:
    """Put every source *recipes* (default :data:`RECIPES`) can reproduce from a clone
    under *clones* into *mirror*, each verified against its package's sha256; list the
    rest."""
    recipes = RECIPES if recipes is None else recipes
    result = MirrorResult()
    for src in sources:
        target = mirror / src.mirror_path()
        recipe = recipes.get(src.package) if src.kind == "archive" else None
        problem = archive_problem(target, src.sha256) if target.is_file() and src.sha256 \
            else None
        if target.is_file() and src.sha256 and problem is None:
            result.present.append(f"{src.label}: {target} (sha256 verified)")
            result.sums[src.mirror_path()] = src.sha256
            continue
        if recipe is None and problem is not None:
            # a truncated or foreign file where the archive goes: Spack would refuse it
            result.wrong.append(f"{src.label}: {problem.split(': remake')[0]}: fetch "
                                f"{src.url} again on a machine with network")
            continue
        if recipe is None:
            why = (NOT_FROM_GIT.get(src.package, "no recipe reproduces it from a repository")
                   if src.kind == "archive" else "a patch Spack downloads")
            checksum = f"sha256 {src.sha256}" if src.sha256 else "no checksum"
            result.need_network.append(
                f"{src.label}: {why}; fetch {src.url} ({checksum}) on a machine with network "
                f"into <mirror>/{src.mirror_path()} (or `spack mirror create`)")
            continue
        # a working clone (<name>) or a bare one (<name>.git, `git clone --mirror`)
        clone = next((c for c in (clones / recipe.clone_name,
                                  clones / f"{recipe.clone_name}.git")
                      if (c / ".git").exists() or (c / "HEAD").is_file()),
                     clones / recipe.clone_name)
        if not (clone / ".git").exists() and not (clone / "HEAD").is_file():
            # no checksum in package.py (STREAM): the copy made before is kept when it is
            # the one the mirror's manifest lists
            listed = None if src.sha256 else read_manifest(mirror).get(src.mirror_path())
            if listed and target.is_file() and sha256_of(target) == listed:
                result.present.append(f"{src.label}: {target} (no clone here; sha256 as "
                                      f"{MANIFEST} lists it)")
                result.sums[src.mirror_path()] = listed
                continue
            result.missing_clones.append(
                f"{src.label}: no clone at {clone}: `git clone {recipe.url()} {clone}` "
                "(on a machine with network; copy it here)")
            continue
        ref = recipe.tag.format(version=src.version) if recipe.tag else "HEAD"
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".part-",
                                         delete=False) as tmp:
            part = Path(tmp.name)
        try:
            commit = git_archive(clone, ref, recipe.prefix.format(version=src.version), part)
            if src.sha256:
                problem = archive_problem(part, src.sha256)
                if problem:
                    result.wrong.append(
                        f"{src.label}: git archive of {recipe.repository} {ref} ({commit[:12]}) "
                        f"has sha256 {sha256_of(part)}, {src.package_py} declares "
                        f"{src.sha256}: not put in the mirror")
                    continue
                note = "sha256 verified against package.py"
            else:
                note = (f"{ref} = {commit[:12]}; package.py declares no checksum (a git "
                        "clone): Spack takes the mirror copy unverified")
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(part, 0o644 & ~umask)  # a shared mirror: others' Spack reads it
            result.sums[src.mirror_path()] = sha256_of(part)
            os.replace(part, target)
            result.made.append(f"{src.label}: {target} ({note})")
        finally:
            part.unlink(missing_ok=True)
    return result


def read_manifest(mirror: str | Path) -> dict[str, str]:
    """The mirror's :data:`MANIFEST` as {path in the mirror: sha256}; {} when there is none.
    A line that is not ``<64 hex digits>  <path>`` is named (exit 2)."""
    path = Path(mirror) / MANIFEST
    if not path.is_file():
        return {}
    sums: dict[str, str] = {}
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the manifest ({err}): remake it with "
                         "`hpcval spack mirror`") from None
    for number, line in enumerate(lines, 1):
        found = re.fullmatch(r"([0-9a-f]{64}) [ *](\S.*)", line.strip())
        if not found or found.group(2).startswith("/") or ".." in found.group(2).split("/"):
            raise InputError(f"{path}: line {number}: not `<sha256>  <path in the mirror>`: "
                             "remake it with `hpcval spack mirror`")
        sums[found.group(2)] = found.group(1)
    return sums


def write_manifest(mirror: str | Path, sums: dict[str, str]) -> Path:
    """Add *sums* to the mirror's :data:`MANIFEST` (keeping the lines of other archives),
    sorted by path, written whole (a temporary file renamed)."""
    path = Path(mirror) / MANIFEST
    merged = {**read_manifest(mirror), **sums}
    part = path.with_name(f".{MANIFEST}.part")
    part.write_text("".join(f"{sha}  {rel}\n" for rel, sha in sorted(merged.items())))
    os.replace(part, path)
    return path


def manifest_problems(mirror: str | Path) -> list[str]:
    """One line per archive of the mirror's manifest that is missing or whose sha256 is
    not the manifest's (named with both sums): every archive, the ones Spack's packages
    declare no checksum for (STREAM) included."""
    problems = []
    for rel, expected in read_manifest(mirror).items():
        where = Path(mirror) / rel
        if not where.is_file():
            problems.append(f"{where}: missing (listed in {Path(mirror) / MANIFEST}): remake it "
                            "with `hpcval spack mirror`")
            continue
        problem = archive_problem(where, expected)
        if problem:
            problems.append(problem.replace("expected", f"expected by {MANIFEST}", 1))
    return problems


def manifest_sha256(path: str | Path) -> str | None:
    """The sha256 the manifest of the mirror holding *path* lists for it, if any (the
    mirror root is one of its first three parents)."""
    path = Path(path)
    for root in list(path.parents)[:4]:
        if (root / MANIFEST).is_file():
            return read_manifest(root).get(path.relative_to(root).as_posix())
    return None


def site_scope() -> Path | None:
    """``$SPACK_ROOT/etc/spack/site``, where docs/spack.md configures Spack."""
    root = os.environ.get("SPACK_ROOT")
    return Path(root) / "etc" / "spack" / "site" if root else None


def _site_yaml(name: str) -> dict[str, Any]:
    """``$SPACK_ROOT/etc/spack/site/<name>``; one that is not YAML, or not a mapping,
    is named (exit 2), never taken as empty."""
    from hpcval.core.yamlio import load_yaml_bounded, read_bounded

    scope = site_scope()
    path = scope / name if scope else None
    if path is None or not path.is_file():
        return {}

    def error(file: str, where: str, reason: str) -> InputError:
        return InputError(f"{file}: {where + ': ' if where else ''}{reason} (Spack's site "
                          "configuration: docs/spack.md, section 1)")

    data = load_yaml_bounded(read_bounded(path, error), str(path), error)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(str(path), "", "expected a mapping at the top")
    return dict(data)


def default_builtin() -> Path | None:
    """The builtin repository the site scope's repos.yaml names (docs/spack.md)."""
    repos = _site_yaml("repos.yaml")
    entry = (repos.get("repos") or repos.get("repos:") or {})
    builtin = entry.get("builtin") if isinstance(entry, dict) else None
    if isinstance(builtin, dict):
        builtin = builtin.get("destination") or builtin.get("path")
    return Path(str(builtin)) if builtin else None


def default_mirror() -> Path | None:
    """The first local (``file://``) mirror of the site scope's mirrors.yaml."""
    mirrors = _site_yaml("mirrors.yaml")
    for entry in (mirrors.get("mirrors") or mirrors.get("mirrors:") or {}).values():
        url = entry if isinstance(entry, str) else (entry or {}).get("url", "")
        if isinstance(url, dict):
            url = url.get("url", "")
        if str(url).startswith("file://"):
            return Path(str(url)[len("file://"):])
    return None
