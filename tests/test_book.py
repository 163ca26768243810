"""The book builds with no warnings from the smoke runs, and its pages work offline."""

import re
import shutil
from pathlib import Path

import pytest

from acl26 import book, cli, provenance

pytestmark = [pytest.mark.notebook, pytest.mark.assets, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_table_escapes_pipes_and_newlines():
    text = book.table([{"a": "x|y", "b": "1\n2"}])
    assert "x\\|y" in text and "1 2" in text
    assert book.table([]) == "*(nothing yet)*\n"


@pytest.fixture(scope="module")
def built(smoke_book, tmp_path_factory):
    out, _ = smoke_book
    root = tmp_path_factory.mktemp("bookroot")
    shutil.copy(ROOT / "_config.yml", root)
    shutil.copytree(ROOT / "book", root / "book", ignore=shutil.ignore_patterns("executed", "_generated", "_static"))
    shutil.copytree(out, root / "book" / "executed")
    provenance.write_manifest(root / "book" / "executed")  # as acl26 book does before generating the pages
    book.generate(root / "book" / "executed", root / "book" / "_generated", profile="smoke")
    book.vendor_mathjax(root / "book" / "_static")
    book.build(root)  # -W -n --keep-going: any warning fails
    return root / "_build" / "html"


def test_book_has_every_page_and_the_chapter_claims_table(built):
    for page in ["index.html", "book/intro.html", "book/claims.html", "book/performance.html", "book/assets.html",
                 "book/environment.html", "book/executed/lopt.html"]:
        assert (built / page).is_file(), page
    chapter = (built / "book" / "executed" / "lopt.html").read_text()
    assert "holds?" in chapter and "LoPT" in chapter
    ledger = (built / "book" / "claims.html").read_text()
    assert "exact match 1.0" in ledger


def test_each_chapter_opens_with_a_folded_run_box_whose_downloads_match_their_sha256(built):
    import hashlib

    executed = built.parent.parent / "book" / "executed"
    for pid in ("lopt", "models"):
        html = (built / "book" / "executed" / f"{pid}.html").read_text()
        text = re.sub(r"<[^>]+>", "", html)  # the command is highlighted token by token
        assert "Run this yourself" in html and "dropdown" in html
        assert f"acl26 run {pid} --profile smoke" in text and "cache key" in text and "git commit" in text
        assert html.index("Run this yourself") < html.index("Parameters (papermill)")
        for name in (f"{pid}.ipynb", f"{pid}-smoke.json"):
            got = list((built / "_downloads").rglob(name))
            assert len(got) == 1, name
            digest = hashlib.sha256(got[0].read_bytes()).hexdigest()
            assert digest in html, f"{name}: the page shows another sha256"
        src = executed / f"{pid}.ipynb"
        assert hashlib.sha256(src.read_bytes()).hexdigest() in html
        # the parameters cell and papermill's injected one are folded away
        assert html.count("tag_hide-cell") >= 2, pid


def test_verify_passes_on_the_fresh_book_and_fails_on_a_tampered_copy(built, tmp_path, capsys):
    executed = built.parent.parent / "book" / "executed"
    assert cli.main(["verify", str(executed)]) == 0
    assert "verdicts decided again from the saved results, all as saved" in capsys.readouterr().out
    copy = tmp_path / "executed"
    shutil.copytree(executed, copy)
    result = copy / "results" / "lopt-smoke.json"
    result.write_text(result.read_text().replace('"holds?": "yes"', '"holds?": "no"', 1))
    assert cli.main(["verify", str(copy)]) == 2
    cap = capsys.readouterr()  # the file's hash, and the verdict that no longer follows from its evidence
    assert "lopt-smoke.json: sha256 differs" in cap.out and "decided again from the evidence 'yes'" in cap.out
    assert "2 problems in" in cap.err


def test_pages_load_nothing_from_the_network(built):
    pattern = re.compile(r"""<(?:script|link|img)[^>]+(?:src|href)=["'](https?:)?//""", re.I)
    for page in built.rglob("*.html"):
        html = page.read_text()
        assert not pattern.search(html), f"{page.relative_to(built)} loads a remote resource"
    assert (built / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()
    intro = (built / "book" / "intro.html").read_text()
    assert "_static/mathjax/tex-mml-chtml.js" in intro


def test_no_stderr_or_progress_noise_in_chapter(built):
    chapter = (built / "book" / "executed" / "lopt.html").read_text()
    assert "it/s]" not in chapter and "Warning" not in chapter


def test_performance_page_takes_rows_of_different_shapes(tmp_path):
    """Benchmark rows may lack a ratio (None), carry NaN, or add their own fields; all are shown."""
    from acl26 import bench, io

    executed = tmp_path / "executed"
    data = {"title": "T", "note": "n", "started": "now", "machine": bench.machine(), "quick": True,
            "goals": [{"goal": "g", "target": "t", "measured": "m", "met": None}],
            "rows": [{"benchmark": "a", "median_s": 0.00123456, "ratio": 1.0},
                     {"benchmark": "b", "median_s": 0.5, "ratio": None, "mweights_per_s": 1553.6},
                     {"benchmark": "c", "median_s": float("nan"), "ratio": 2.5, "note": "skipped: memory"}]}
    io.write_json(executed / "bench" / "sherry.json", data)
    book.generate(executed, tmp_path / "generated", profile="smoke")
    page = (tmp_path / "generated" / "performance.md").read_text()
    assert "| a | 0.001235 | 1.00× |" in page
    assert "| b | 0.5 | — | 1554 |" in page
    assert "mweights_per_s" in page and "skipped: memory" in page and "| c | — | 2.50× |" in page
    assert "read bandwidth: not recorded" in page, "a record without a probe says so"


def test_performance_page_shows_the_machine_of_each_record(tmp_path):
    """CPU model, SIMD level and the read bandwidth probed in that run, above each chapter's tables."""
    from acl26 import io

    m = {"cpus": 2, "cpu": "Some CPU | 9", "simd": "AVX-512 (VNNI)", "python": "3.11", "platform": "x",
         "read_gb_s": 38.96, "read_gb_s_range": [37.2, 40.04]}
    data = {"title": "T", "started": "now", "machine": m, "goals": [], "rows": [{"benchmark": "a", "median_s": 1.0}]}
    io.write_json(tmp_path / "executed" / "bench" / "sherry.json", data)
    book.generate(tmp_path / "executed", tmp_path / "generated", profile="smoke")
    page = (tmp_path / "generated" / "performance.md").read_text()
    assert ("**Machine:** Some CPU \\| 9; SIMD: AVX-512 (VNNI); read bandwidth: 39.0 GB/s (probed in this run, "
            "range 37.2–40.0).") in page
    assert book.machine_line({"read_gb_s": "fast", "read_gb_s_range": [1]}).endswith("read bandwidth: not recorded.")


def test_ledger_page_keeps_claims_facts_controls_and_checks_apart(tmp_path, monkeypatch):
    """The five verdicts are counted for the paper claims alone; the other kinds get their own sections."""
    from acl26 import claims as C
    from acl26.stats import Interval

    monkeypatch.setenv("ACL26_OUT", str(tmp_path / "out"))
    rows = [C.Claim("ctl", "the subject responds", "", "", C.at_least(1.1), kind="control"),
            C.Claim("a", "the method wins", "< 1", "Table 2", C.at_most(1.0), controls=("ctl",)),
            C.Claim("b", "it is fast", "2×", "Table 3", C.at_least(2.0)),
            C.Claim("bits", "1.25 bits per weight", "1.25", "§3", C.equals(1.25), kind="fact"),
            C.Claim("learns", "the LM learns", "", "", C.at_most(0.5), kind="check")]
    ledger = C.Ledger("lopt", "smoke", rows)
    ledger.record("ctl", 1.0, interval=Interval(1.0, 0.9, 1.1, 0.95, "t over seeds", 3))
    ledger.record("a", 0.9)
    ledger.record("b", 2.5, interval=Interval(2.5, 2.2, 2.8, 1.0, "range over repeats", 5))
    ledger.record("bits", 1.25)
    ledger.record("learns", 0.3)
    executed = tmp_path / "executed"
    (executed / "results").mkdir(parents=True)
    (executed / "results" / "lopt-smoke.json").write_bytes(ledger.save().read_bytes())
    book.generate(executed, tmp_path / "generated", profile="smoke")
    page = (tmp_path / "generated" / "claims.md").read_text()
    assert ("2 paper claims: 1 hold, 0 do not hold, **0 inconclusive**, **1 not testable here** (measured: 1 yes), "
            "0 not tested") in page
    assert "| not testable here (measured: yes) |" in page  # the claim's own verdict beside the control's
    for section in ("## Facts by construction", "## Controls", "## Checks"):
        assert section in page
    assert "±0.3 / 0.5" in page  # the speed claim's half-width beside its margin
    assert "not testable here: control ctl (the subject responds)" in page
    intro = (tmp_path / "generated" / "intro_status.md").read_text()
    assert "1 of 2 hold, 0 do not, 0 inconclusive, 1 not testable here (measured: 1 yes), 0 not tested" in intro
    assert "facts by construction: 1 of 1 hold" in intro and "controls: 0 of 1 hold" in intro
