"""One-line errors, always: what a careless user or a hostile machine does to the command line.

A read-only or uncreatable cache, a full disk, corrupted results in ``book/executed``, an output path
that is a file, a bug of ours, and a signal at any moment (during the imports too): every case ends
in one ``acl26: ...`` line on stderr (no traceback unless ``--debug``), a non-zero exit status, and
nothing half-written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acl26 import cli

ACL26 = str(Path(sys.executable).with_name("acl26"))


def _errors(err: str) -> list[str]:
    """The lines of stderr that are not a progress bar's (tqdm redraws with carriage returns)."""
    lines = [seg for line in err.split("\n") for seg in [line.split("\r")[-1].strip()] if seg]
    return [ln for ln in lines if not ln.startswith(("assets:", "[IPKernelApp]"))]


def _one_error(err: str, *needles: str) -> str:
    assert "Traceback" not in err, err
    lines = _errors(err)
    assert len(lines) == 1 and lines[0].startswith("acl26: "), lines
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _mount_tmpfs(where: Path, options: str) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    return proc.returncode == 0


@contextlib.contextmanager
def _mounted(where: Path, options: str):
    ok = _mount_tmpfs(where, options)
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture(params=["read-only", "under-a-file"])
def bad_cache(request, tmp_path):
    """A cache folder that cannot be written: a read-only file system (a tmpfs mounted ro as root, the
    folder's permissions otherwise), or a path under a regular file (it cannot be created)."""
    if request.param == "under-a-file":
        (tmp_path / "afile").write_text("x")
        yield tmp_path / "afile" / "cache"
        return
    ro = tmp_path / "ro"
    with _mounted(ro, "ro,size=1m") as mounted:
        if not mounted:
            if os.geteuid() == 0:
                pytest.skip("cannot mount a read-only tmpfs here (root ignores permissions); the other case covers it")
            ro.mkdir(exist_ok=True)
            ro.chmod(0o555)
        try:
            yield ro / "cache"
        finally:
            if not mounted:
                ro.chmod(0o755)


def _cli(*argv, env=None, cwd=None, timeout=300):
    return subprocess.run([ACL26, *argv], capture_output=True, text=True, env={**os.environ, **(env or {})},
                          cwd=cwd, timeout=timeout)


# ---- an unwritable cache


def test_list_works_with_an_unwritable_cache(bad_cache):
    proc = _cli("list", env={"ACL26_CACHE": str(bad_cache), "NUMBA_CACHE_DIR": ""})
    assert proc.returncode == 0 and "lopt:" in proc.stdout and "Traceback" not in proc.stderr, proc.stderr
    assert not bad_cache.exists()


def test_fetch_into_an_unwritable_cache_is_one_line(bad_cache):
    proc = _cli("fetch", "tok-gpt2", env={"ACL26_CACHE": str(bad_cache)})
    assert proc.returncode == 2
    _one_error(proc.stderr, str(bad_cache), "ACL26_CACHE")


def test_run_with_an_unwritable_cache_fails_before_the_notebook(bad_cache, tmp_path):
    out = tmp_path / "out"
    proc = _cli("run", "lopt", "--profile", "smoke", "--out", str(out), "-q",
                env={"ACL26_CACHE": str(bad_cache)}, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2
    _one_error(proc.stderr, str(bad_cache))
    assert not out.exists() or not any(out.iterdir())


def test_kernels_run_with_an_unwritable_numba_cache(bad_cache):
    code = ("import numpy as np\nfrom acl26.kernels import dp_alloc\n"
            "print(dp_alloc.allocate(np.array([[3.0, 1.0, 0.0], [2.0, 1.0, 0.0]]), 3))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_CACHE_DIR": str(bad_cache / "numba"), "ACL26_CACHE": str(bad_cache)})
    assert proc.returncode == 0, proc.stderr
    assert "runs uncached" in proc.stderr and "Traceback" not in proc.stderr


def test_a_damaged_numba_cache_is_recompiled(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    code = ("import numpy as np\nfrom acl26.kernels import dp_alloc\n"
            "print(dp_alloc.allocate(np.array([[3.0, 1.0, 0.0], [2.0, 1.0, 0.0]]), 3).tolist())")
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    files = sorted((tmp_path / "numba").rglob("*.nb*"))
    assert any(f.suffix == ".nbi" for f in files) and any(f.suffix == ".nbc" for f in files)
    for damage in ("truncate-index", "garbage-data"):
        for f in files:
            if damage == "truncate-index" and f.suffix == ".nbi":
                f.write_bytes(f.read_bytes()[:10])
            if damage == "garbage-data" and f.suffix == ".nbc":
                f.write_bytes(b"garbage")
        again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
        assert "damaged" in again.stderr and "recompiling" in again.stderr
        files = sorted((tmp_path / "numba").rglob("*.nb*"))
        clean = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert clean.returncode == 0 and "damaged" not in clean.stderr, "the entry was saved afresh"


# ---- a full disk


@pytest.fixture()
def fake_bench(monkeypatch):
    import fakepaper
    from acl26 import registry

    def benchmarks(quick):
        return {"title": "Fake", "goals": [], "rows": [{"x": "y" * 1000, "i": i} for i in range(300)]}

    monkeypatch.setitem(registry.CHAPTERS, "fake", dataclasses.replace(fakepaper.chapter(), benchmarks=benchmarks))


def test_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys, fake_bench):
    small = tmp_path / "small"
    with _mounted(small, "size=64k") as mounted:
        if not mounted:  # no tmpfs to fill: the disk fills at the first flush instead
            small.mkdir()

            def full(fd):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            monkeypatch.setattr(os, "fsync", full)
        code = cli.main(["bench", "fake", "--quick", "--out", str(small / "bench")])
        err = capsys.readouterr().err
        assert code == 2
        _one_error(err, "No space left on device", str(small / "bench" / "fake.json"))  # the file it was writing
        left = [p.name for p in (small / "bench").iterdir()] if (small / "bench").exists() else []
        assert left == [] or left == [".acl26-files"] and json.loads((small / "bench" / left[0]).read_text()) == {}, left


# ---- outputs and corrupted files


def test_run_into_a_file_is_one_line(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("mine")
    proc = _cli("run", "lopt", "--profile", "smoke", "--out", str(blocker), "-q", cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2
    _one_error(proc.stderr, str(blocker))
    assert blocker.read_text() == "mine"


@pytest.fixture()
def fake_checkout(tmp_path, monkeypatch):
    """A folder that acl26 takes for its checkout, with an empty ``book/executed``."""
    root = tmp_path / "repo"
    (root / "book" / "executed").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "acl26-repro"\n')
    monkeypatch.chdir(root)
    return root


BAD_FILES = {
    "bench-not-json": ("bench/lopt.json", "{not json"),
    "bench-a-list": ("bench/lopt.json", "[1, 2]"),
    "bench-no-machine": ("bench/lopt.json", json.dumps({"started": "x", "goals": [], "rows": []})),
    "bench-goals-not-objects": ("bench/lopt.json", json.dumps({"started": "x", "machine": {"cpus": 2, "python": "3"},
                                                               "goals": [1], "rows": []})),
    "results-claims-not-list": ("results/lopt-book.json", json.dumps({"paper": "lopt", "profile": "book",
                                                                      "started": "x", "wall_s": 1, "claims": {},
                                                                      "metrics": {}})),
    "results-claim-missing-verdict": ("results/lopt-book.json", json.dumps(
        {"paper": "lopt", "profile": "book", "started": "x", "wall_s": 1, "metrics": {},
         "claims": [{"claim": "c", "source": "s", "paper": "p", "ours": "o", "test": "t"}]})),
    "run-wall-is-text": ("runs/lopt.json", json.dumps({"profile": "book", "wall_s": "fast", "finished": "x"})),
    "build-notebooks-list": ("build.json", json.dumps({"notebooks": [], "benchmarks": {}})),
    "results-truncated": ("results/lopt-book.json", '{"paper": "lopt", "profile": "bo'),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_corrupted_book_files_are_one_line(fake_checkout, capsys, case):
    rel, text = BAD_FILES[case]
    bad = fake_checkout / "book" / "executed" / rel
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text(text)
    code = cli.main(["book", "--skip-run", "--skip-bench", "--skip-build"])
    err = capsys.readouterr().err
    assert code == 2
    line = _one_error(err, str(bad))
    assert "acl26 " in line.split(str(bad), 1)[1], "the message names the command that remakes the file"
    assert not (fake_checkout / "book" / "_generated").exists(), "nothing generated from a corrupted file"


# ---- bugs and interrupts


def test_a_bug_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    def boom(args):
        raise TypeError("something of ours broke")

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with(parser(), "list", boom))
    assert cli.main(["list"]) == cli.INTERNAL_ERROR
    err = capsys.readouterr().err
    _one_error(err, "internal error", "TypeError", "something of ours broke", "--debug")
    assert cli.main(["list", "--debug"]) == cli.INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("acl26: error: internal error")


def _with(parser, command, func):
    parser._subparsers._group_actions[0].choices[command].set_defaults(func=func)
    return parser


def test_an_interrupt_in_a_command_is_one_line(monkeypatch, capsys):
    def interrupted(args):
        raise KeyboardInterrupt

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with(parser(), "list", interrupted))
    assert cli.main(["list"]) == 130
    _one_error(capsys.readouterr().err, "interrupted")


def test_handlers_are_restored_after_main():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    cli.main(["--version"])
    assert {s: signal.getsignal(s) for s in before} == before


def _default_signals():
    """In the child: the signals at their defaults. A job started in the background by a non-interactive
    shell (or under nohup) inherits SIGINT (SIGHUP) ignored, and acl26 rightly leaves an ignored signal
    alone, so the tests below would send signals into the void."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("delay", [0.1, 0.25, 0.5, 1.0])
def test_a_signal_during_import_or_work_is_one_line(sig, delay):
    """``acl26 list`` imports every chapter (torch, numba, transformers: over a second here): a signal
    at any point of that ends in one line and status 130 (or the command finishes first)."""
    proc = subprocess.Popen([ACL26, "list"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)
    time.sleep(delay)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:
        assert "Traceback" not in err
        return
    assert proc.returncode == 130, (proc.returncode, err)
    _one_error(err, "interrupted")


_HELD = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from acl26 import cli
stop, old = cli._install_handlers()
try:
    import {name}
    print("imported", {name}.DONE, flush=True)
    time.sleep(5)
    print("not interrupted", flush=True)
except KeyboardInterrupt:
    print("interrupted after the import" if "{name}" in sys.modules else "interrupted inside the import", flush=True)
finally:
    stop.restore()
"""

_SELF_SIGNAL = ("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\n"
                "t = time.perf_counter()\nwhile time.perf_counter() - t < 0.3:\n    pass\nDONE = True\n")


def test_a_signal_inside_another_package_s_import_is_held_until_it_returns(tmp_path):
    """A signal that arrives while another package's module runs its top-level code (torch's C++ init
    calls back into Python there, and a KeyboardInterrupt raised inside aborts the process) is held: the
    import finishes, then the interruption arrives, from the SIGALRM poll, within the poll's period."""
    (tmp_path / "foreign_probe.py").write_text(_SELF_SIGNAL)
    code = _HELD.format(name="foreign_probe")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                          preexec_fn=_default_signals)
    assert proc.stdout.split("\n")[:2] == ["imported True", "interrupted after the import"], (proc.stdout, proc.stderr)


def test_acl26_s_own_import_stays_interruptible(tmp_path):
    """acl26's own modules (numba may compile at their import) are not held: the signal interrupts at once."""
    import importlib.util

    seen = {}
    probe = tmp_path / "probe.py"
    probe.write_text("import sys\nSEEN['foreign'] = IN(sys._getframe())\n")
    for name, expect in (("acl26._probe_own", False), ("some_pkg._probe", True)):
        spec = importlib.util.spec_from_file_location(name, probe)
        mod = importlib.util.module_from_spec(spec)
        mod.SEEN, mod.IN = seen, cli._in_foreign_import
        spec.loader.exec_module(mod)
        assert seen["foreign"] is expect, name
    assert cli._in_foreign_import(sys._getframe()) is False  # plain code, no import on the stack


def test_a_second_signal_forces_the_stop(tmp_path):
    """Ctrl-C twice: the first unwinds (here, a cleanup that hangs), the second ends the process."""
    code = ("import time, sys\nfrom acl26 import cli\n"
            "def hang(args):\n"
            "    try:\n        time.sleep(60)\n    finally:\n"
            "        print('cleaning', flush=True)\n        time.sleep(60)\n"
            "p = cli.build_parser\n"
            "def build():\n    parser = p()\n"
            "    parser._subparsers._group_actions[0].choices['list'].set_defaults(func=hang)\n    return parser\n"
            "cli.build_parser = build\nsys.exit(cli.main(['list']))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_signals)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    assert proc.stdout.readline().strip() == "cleaning"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGINT


def test_a_keyerror_from_a_bug_is_not_shown_as_a_bare_key(monkeypatch, capsys):
    def bug(args):
        return {}["machine"]

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with(parser(), "list", bug))
    assert cli.main(["list"]) == cli.INTERNAL_ERROR
    _one_error(capsys.readouterr().err, "internal error", "KeyError", "machine")
    assert cli.main(["run", "nope"]) == 2  # unknown paper: a sentence, the user's error
    _one_error(capsys.readouterr().err, "unknown paper 'nope'")


def test_a_closed_pipe_is_quiet():
    proc = subprocess.run(f"{ACL26} list | head -c 10 > /dev/null", shell=True, capture_output=True, text=True)
    assert "Traceback" not in proc.stderr and "error" not in proc.stderr


def test_a_signal_turned_into_another_error_is_still_an_interruption(monkeypatch, capsys):
    """A C extension interrupted while it imports (numpy) turns the signal's KeyboardInterrupt into an
    ImportError: that is an interruption (one line, 130), not an internal error."""
    from acl26 import cli

    def interrupted_import(args):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            raise ImportError("numpy._core.umath failed to import") from None

    build = cli.build_parser

    def parser():
        p = build()
        p._subparsers._group_actions[0].choices["list"].set_defaults(func=interrupted_import)
        return p

    monkeypatch.setattr(cli, "build_parser", parser)
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    _default_signals()  # not ignored (nohup), so main() installs its handler
    try:
        assert cli.main(["list"]) == 130
    finally:
        for s, h in before.items():
            signal.signal(s, h)
    assert capsys.readouterr().err.strip() == "acl26: interrupted; nothing was left half-written"


def test_a_kernel_cache_entry_is_stale_when_any_kernel_file_changes():
    """numba compiles act8's functions and constants into decode's step: the cache stamp of every kernel holds
    every kernel file's mtime and size, so an edit to act8.py alone invalidates decode's entries too."""
    from acl26.kernels import _jit, decode

    loc = _jit._Locator.from_function(decode._mv.py_func, decode.__file__)
    stamp = {name: (mtime, size) for name, mtime, size in loc.get_source_stamp()}
    assert {"decode.py", "ternary/act8.py", "ternary/simd.py", "dp_alloc.py"} <= set(stamp)
    f = Path(_jit.__file__).parent / "ternary" / "act8.py"
    assert stamp["ternary/act8.py"] == (f.stat().st_mtime_ns, f.stat().st_size)
