"""The Optuna storage a study lives in: opening it (SQLite in WAL mode, heartbeats), finding a study by name,
naming what is wrong with it (a full disk, a corrupt or read-only file) without leaking a password.

- ``rdb``: :func:`~autotune.storage.rdb.open_storage`, worker identity and heartbeats.
- ``studies``: an existing study by name; the one-line error of a storage that cannot be opened.
- ``faults``: a storage error -> full, corrupt, read-only (one place, walking the exception's chain).
- ``sqlitelock``: first opens of a SQLite file ordered by a file lock.

It may import optuna, SQLAlchemy and :mod:`autotune.records` (the attribute names); what is kept on a study,
and reading it back, is :mod:`autotune.records`.
"""
