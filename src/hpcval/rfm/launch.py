"""How a check's job is launched, and what of a site config reaches its script.

Plain functions, each called by one hook of :class:`hpcval.rfm.HpcvalTest`
(or by a check through its methods), so that each can be tested alone:

* values that reach a job script: ``export K=V`` values quoted
  (:func:`shell_value`), names and options checked (:func:`check_env_name`,
  :func:`check_script_option`); an unsafe value is an :class:`UnsafeConfigValue`.
"""

from __future__ import annotations

import re
import shlex

from hpcval.errors import SiteError

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ENV_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
#: Characters a value may hold unquoted in ``export K=V`` without the shell
#: reading anything into it.
_PLAIN = re.compile(r"[A-Za-z0-9_./:,+@%=-]*\Z")


class UnsafeConfigValue(SiteError):
    """A config value would be run by the shell of a job script."""


def check_env_name(name: str, where: str) -> str:
    """An environment variable name, or a clear error naming ``where`` it is set."""
    if not isinstance(name, str) or not _ENV_NAME.match(name):
        raise UnsafeConfigValue(
            f"{where}: env_vars name {name!r} is not a shell variable name "
            "([A-Za-z_][A-Za-z0-9_]*): fix the site config")
    return name


def shell_value(value: object) -> str:
    """``value`` as the right-hand side of ``export K=V`` in a job script:
    literal text, single-quoted, except ``$NAME``/``${NAME}`` references to
    other variables (``$PATH``), which stay expansions. ``$(...)``, backticks,
    ``;``, spaces and quotes reach the program as the characters they are."""
    text = str(value)
    if "\n" in text or "\0" in text:
        raise UnsafeConfigValue(f"value {text!r} holds a newline or NUL byte")
    if _PLAIN.match(text):
        return text or "''"
    parts: list[str] = []
    pos = 0
    for m in _ENV_REF.finditer(text):
        if m.start() > pos:
            parts.append(_literal(text[pos:m.start()]))
        parts.append('"${' + (m.group(1) or m.group(2)) + '}"')
        pos = m.end()
    if pos < len(text):
        parts.append(_literal(text[pos:]))
    return "".join(parts)


def _literal(text: str) -> str:
    """``text`` quoted for bash, written without ``$(`` and without a
    backtick: ReFrame itself runs those (``osext.expandvars``, in
    ``loadenv``) on every ``env_vars`` value before it writes the job
    script, whatever the shell quoting around them. ``$`` and ``(`` are
    quoted apart (``'$''('``); a backtick is bash's ``$'\\x60'``."""
    pieces: list[str] = []
    for i, chunk in enumerate(text.split("`")):
        if i:
            pieces.append("$'\\x60'")
        for j, part in enumerate(chunk.split("$(")):
            if j:
                pieces.append("'$''('")
            if part:
                pieces.append(shlex.quote(part))
    return "".join(pieces) or "''"


def is_plain_value(value: object) -> bool:
    """True where ``value`` is safe unquoted (letters, digits, ``_./:,+@%=-``
    and ``$NAME`` references only)."""
    text = _ENV_REF.sub("", str(value))
    return bool(_PLAIN.match(text))


def check_script_option(option: object, where: str) -> str:
    """A scheduler option (``#SBATCH`` line) or launcher option: one line, no NUL."""
    text = str(option)
    if "\n" in text or "\r" in text or "\0" in text:
        raise UnsafeConfigValue(f"{where}: option {text!r} holds a line break: one option, "
                                "one line (fix the site config)")
    return text
