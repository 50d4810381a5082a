"""A process that takes a study's ``finish`` lease, for the lease tests: ``python lease_holder.py URL STUDY``.

It waits for the file ``go`` in its working folder (so that several start together), tries once,
prints ``won`` or ``lost <holder>``, and stays until it is killed (holding the lease, if it won, without
renewing it: killed, it is a holder that died).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import optuna

from autotune.storage.rdb import open_storage, worker_id
from autotune.sweep.workers.leases import FINISH, open_leases


def main() -> None:
    url, name = sys.argv[1:3]
    storage = open_storage(url)
    leases = open_leases(storage, optuna.load_study(study_name=name, storage=storage))
    assert leases is not None
    while not Path("go").exists():
        time.sleep(0.01)
    holder = leases.acquire(FINISH, worker_id())
    print("won" if holder is None else f"lost {holder}", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
