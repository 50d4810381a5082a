"""Opening an existing study by name, and saying what is wrong with a storage without leaking its password.

What autotune keeps on a study's trials, and reading it back, is :mod:`autotune.records`.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import optuna

from autotune.errors import AutotuneError, first_line
from autotune.storage.faults import fault_error

__all__ = ["DEFAULT_STORAGE", "load_existing_study", "redact_url", "storage_error", "the_only_study"]

DEFAULT_STORAGE = "sqlite:///autotune.db"  # in the current folder: the embedded default


def load_existing_study(name: str, storage: str) -> optuna.Study:
    """An existing study, or an :class:`AutotuneError` that lists the studies the storage has."""
    names = _study_names(storage)
    if name not in names:
        known = ", ".join(sorted(names)) or "none"
        raise AutotuneError(f"no study {name!r} in {redact_url(storage)} (studies there: {known})")
    return optuna.load_study(study_name=name, storage=storage)


def the_only_study(storage: str) -> str:
    """The name of the one study ``storage`` holds (a command given no ``--study``), or an :class:`AutotuneError`
    that lists them."""
    names = _study_names(storage)
    if len(names) == 1:
        return names[0]
    if not names:
        raise AutotuneError(f"no study in {redact_url(storage)}: run autotune sweep first, or name its --storage")
    raise AutotuneError(f"name one with --study: {redact_url(storage)} holds {len(names)} ({', '.join(sorted(names))})")


def _study_names(storage: str) -> list[str]:
    try:
        return [s.study_name for s in optuna.get_all_study_summaries(storage)]
    except Exception as exc:  # a bad URL, an unreachable database
        raise storage_error(storage, exc) from exc


def storage_error(url: str, exc: BaseException) -> AutotuneError:
    """The one-line error for a storage that cannot be opened, without its password."""
    if (named := fault_error(url, exc)) is not None:  # a full disk, a corrupt or read-only file: said as such
        return named
    return AutotuneError(f"cannot open storage {redact_url(url)!r}: {type(exc).__name__}: {first_line(exc)}")


def redact_url(url: str) -> str:
    """``url`` without a password (``postgresql://user:secret@host/db`` -> ``postgresql://user@host/db``)."""
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    netloc = f"{userinfo.split(':', 1)[0]}@{hostport}" if at else parts.netloc
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    if netloc == parts.netloc and query == urlencode(parse_qsl(parts.query)):
        return url  # nothing to hide: keep the text exactly as given (sqlite:///autotune.db)
    return urlunsplit(parts._replace(netloc=netloc, query=query))
