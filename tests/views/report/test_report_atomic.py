"""A report that cannot be written whole (a full disk) leaves no part of a page or a figure behind.

Without this, a sweep whose disk filled up left a truncated report HTML behind.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from report_studies import make_info, synthetic_study
from tmpfs import mounted_tmpfs

from autotune.errors import AutotuneError
from autotune.views.report import figures_folder, write_report
from autotune.views.report.data import gather
from autotune.views.report.png import write_pngs

OLD_PAGE = "<html>the report of yesterday</html>\n"


def test_a_page_too_big_for_the_disk_leaves_the_old_page_and_no_part_of_the_new(tmp_path: Path) -> None:
    study = synthetic_study(tmp_path / "autotune.db", 30)
    with mounted_tmpfs(tmp_path / "disk", "1m") as disk:  # the page inlines plotly.js: some 4.6 MiB
        page = disk / "report.html"
        page.write_text(OLD_PAGE)
        with pytest.raises(AutotuneError, match=f"cannot write {page}: No space left on device"):
            write_report(study, make_info(), page)
        assert page.read_text() == OLD_PAGE
        assert [p.name for p in disk.iterdir()] == ["report.html"]


def test_figures_that_do_not_fit_leave_no_partial_png(tmp_path: Path) -> None:
    study = synthetic_study(tmp_path / "autotune.db", 30)
    data = gather(study, make_info())
    with mounted_tmpfs(tmp_path / "disk", "40k") as disk:  # room for a figure or so, not for all of them
        folder = figures_folder(disk / "report.html")
        with pytest.raises(AutotuneError, match="No space left on device"):
            write_pngs(data, {}, ["precision", "batch_size"], folder)
        written = sorted(folder.iterdir())
        assert 0 < len(written) < 4  # the disk filled between two figures, or inside one
        for png in written:
            assert png.suffix == ".png" and png.read_bytes().endswith(b"IEND\xaeB`\x82"), png  # whole, or absent
