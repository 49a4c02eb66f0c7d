"""The TP row's known-goods (docs/gate-files.md, "Known-goods"): a blocked float32 matmul and two other reduce
orders pass the numeric layer gates as declared; tp-row-linear-bfloat16's NMSE bound tightened tenfold rejects the
reverse-rank reduce, TOO TIGHT, naming the case and the NMSE it saw."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.layers.test_norm_rope_known_good import every_known_good_passes, tightened_audit

pytestmark = pytest.mark.cpu

ROW = "gates/rows/backend_distributed_tp"


def test_every_known_good_of_the_row_passes_its_gate() -> None:
    every_known_good_passes(ROW, {"tp-column-linear", "tp-row-linear", "tp-row-linear-bfloat16"})


def test_the_bfloat16_nmse_bound_tightened_tenfold_is_too_tight(tmp_path: Path) -> None:
    ran = tightened_audit(tmp_path, ROW, "tp-row-linear-bfloat16", "max: 7.0e-5", "max: 7.0e-6")
    assert ran.returncode == 3, ran.stdout[-4000:] + ran.stderr[-2000:]
    headline = next(line for line in ran.stdout.splitlines() if "TOO TIGHT" in line and "reverse-rank-reduce" in line)
    assert "TOO TIGHT: gate tp-row-linear-bfloat16 rejects known-good reverse-rank-reduce on case 'issue-o-proj-16-tokens-tp" \
           in headline, headline
    assert "NMSE" in headline and "> max 7e-06" in headline, headline
