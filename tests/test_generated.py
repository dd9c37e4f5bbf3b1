"""Every generated document reads as its sources make it (`lossops docs` says which do not; `lossops docs --write`
regenerates them), the check notices a stale one, and every operator has its benchmark rows. The goldens' own
check is tests/test_conformance.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lossops import opset, regenerate
from lossops.bench import measured_ops, runs
from lossops.cli import build_parser, verbs_table


def test_every_generated_document_is_current():
    assert regenerate.stale(verbs_table()) == [], "stale generated documents: run lossops docs --write"


def test_the_guide_tables_are_what_their_sources_make():
    """The guide's operator table has one row per operator, in the set's order; the verbs table names every verb."""
    guide = regenerate.expected(verbs_table())[regenerate.GUIDE]
    table = guide[guide.index(regenerate.begin("operators")):guide.index(regenerate.end("operators"))]
    assert [line.split("|")[1].strip() for line in table.splitlines()[3:]] == list(opset.OPS)
    verbs = guide[guide.index(regenerate.begin("verbs")):guide.index(regenerate.end("verbs"))]
    (choices,) = [a.choices for a in build_parser()._actions if getattr(a, "choices", None)]
    assert all(f"| `lossops {verb}" in verbs for verb in choices)


def test_every_operator_has_benchmark_rows():
    """`lossops bench --op OP --update docs/bench.json` measures a new operator beside the others' runs."""
    measured = {r["op"] for run in runs(json.loads(regenerate.BENCH_RUNS.read_text())) for r in run["rows"]}
    assert measured == set(measured_ops())


def test_a_stale_document_is_named_and_written(tmp_path, monkeypatch):
    """A generated page edited by hand, and a section whose markers are gone, are caught; --write restores the
    page and writes nothing that was current."""
    page, guide, readme = tmp_path / "bench.md", tmp_path / "guide.md", tmp_path / "README.md"
    page.write_text("# typed by hand\n")
    guide.write_text(regenerate.GUIDE.read_text())
    readme.write_text(regenerate.README.read_text())
    monkeypatch.setattr(regenerate, "WHOLE", {page: regenerate.WHOLE[regenerate.ROOT / "docs" / "bench.md"]})
    monkeypatch.setattr(regenerate, "GUIDE", guide)
    monkeypatch.setattr(regenerate, "README", readme)
    assert regenerate.stale(verbs_table()) == [page]
    before = guide.stat().st_mtime_ns
    assert regenerate.main(write=True, goldens=False, verbs_table=verbs_table()) == 0
    assert regenerate.stale(verbs_table()) == [] and page.read_text().startswith("# `lossops bench`")
    assert guide.stat().st_mtime_ns == before
    guide.write_text(guide.read_text().replace(regenerate.end("verbs"), ""))
    with pytest.raises(ValueError, match="has no generated section 'verbs'"):
        regenerate.stale(verbs_table())


def test_lossops_docs_outside_a_checkout_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(regenerate, "GUIDE", tmp_path / "docs" / "guide.md")
    with pytest.raises(ValueError, match="lossops docs works in a checkout"):
        regenerate.main(write=False, goldens=False, verbs_table=verbs_table())


def test_lossops_docs_checks_by_default():
    done = subprocess.run([sys.executable, "-m", "lossops", "docs"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "every generated document is current" in done.stdout, done.stdout + done.stderr
