"""Files acl26 did not just write are untrusted input (issue 38): the evidence codec builds only what it
knows, `acl26 verify` reads only the book's own regular files, the run box turns no record into markup,
JSON readers refuse FIFOs, devices and deep nesting, writers take turns on a folder's ledger, a full disk is
reported with its path, and a killed run's staging folders go with the next run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acl26 import claims as C
from acl26 import cli, evidence, io, provenance, registry
from acl26.errors import RunError

from cases import all_cases

T = evidence.TAG
ROOT = Path(__file__).resolve().parent.parent


def _py(code: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter; ``timeout`` is only a safety net for the old code, which hung."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, **kw)


# ---- the evidence codec


def _hostile(marker: Path) -> list[dict]:
    """Entries whose decoding ran a shell command or a function before (each would create ``marker``)."""
    cmd = f"touch {marker}"
    return [
        {T: "namedtuple", "type": "acl26.sweep:os.system", "items": [cmd]},
        {T: "dataclass", "type": "acl26.sweep:subprocess.run", "fields": {"args": ["touch", str(marker)]}},
        {T: "namedtuple", "type": "acl26.provenance:subprocess.getoutput", "items": [cmd]},
        {T: "dataclass", "type": "acl26.io:Path.touch", "fields": {}},
    ]


def test_decoding_never_calls_what_a_file_names(tmp_path):
    marker = tmp_path / "pwned"
    for entry in _hostile(marker):
        with pytest.raises(evidence.EvidenceError):
            evidence.decode({"x": [entry]})
    assert not marker.exists()


@pytest.mark.parametrize("entry", [
    {T: "dataclass", "type": "acl26.io:Path", "fields": {}},  # a class, but not one acl26 defines there
    {T: "dataclass", "type": "acl26.io:write_text", "fields": {"path": "x", "text": "y"}},  # a function of acl26's
    {T: "namedtuple", "type": "acl26.stats:Interval", "items": [1, 0, 2, 0.95, "t", 3]},  # not a named tuple
    {T: "dataclass", "type": "acl26.kernels.tokmerge:Cut", "fields": {}},  # a named tuple, not a dataclass
    {T: "dataclass", "type": "acl26.stats:Interval.__init__.__globals__", "fields": {}},
    {T: "dataclass", "type": "acl26..stats:Interval", "fields": {}},
    {T: "dataclass", "type": "numpy:ndarray", "fields": {}},
    {T: "dataclass", "type": ["acl26.stats", "Interval"], "fields": {}},
])
def test_only_acl26s_own_classes_of_the_right_kind_are_built(entry):
    with pytest.raises(evidence.EvidenceError):
        evidence.decode(entry)


def test_only_registered_types_are_kept_and_read_back():
    from acl26 import stats
    from acl26.kernels.tokmerge import Cut
    from acl26.papers.alloc_moe.routing import Counter

    iv = stats.Interval(1.0, 0.5, 1.5, 0.95, "t over seeds", 3)
    obj = {"iv": iv, "cut": Cut(*range(len(Cut._fields))), "counter": Counter(2, [4, 4])}
    back = evidence.decode(json.loads(json.dumps(evidence.encode(obj))))
    assert back["iv"] == iv  # registered: itself again
    assert type(back["cut"]) is tuple and back["cut"] == tuple(obj["cut"])  # a named tuple not registered: a tuple
    assert isinstance(back["counter"], evidence.Omitted)  # a dataclass not registered: kept as its name
    # a class acl26 defines whose construction does work from its fields (Counter allocates n_layers lists:
    # 126 bytes of JSON cost 1 GB) is not registered, so never built from a file
    with pytest.raises(evidence.EvidenceError, match="not a type evidence may hold"):
        evidence.decode({T: "dataclass", "type": f"{Counter.__module__}:Counter",
                         "fields": {"n_layers": 5_000_000, "n_experts": []}})


@pytest.mark.parametrize("entry", [
    {T: "DataFrame", "columns": list(range(2000)), "index": list(range(100_000)), "index_names": [None],
     "columns_names": [None], "data": {str(i): 0 for i in range(2000)}},  # a scalar broadcast: 1.6 GB before
    {T: "Series", "values": 0, "index": list(range(100_000)), "index_names": [None], "name": None},
    {T: "DataFrame", "columns": ["a"], "index": [1, 2], "index_names": [None], "columns_names": [None],
     "data": {"0": {T: "ndarray", "dtype": "<i8", "shape": [1], "items": [1]}}},
])
def test_frame_columns_must_be_arrays_of_the_index_length(entry):
    with pytest.raises(evidence.EvidenceError, match="index's"):
        evidence.decode(entry)


@pytest.mark.parametrize("entry", [
    {T: "ndarray", "dtype": "<U50000000", "shape": [3], "items": ["a", "b", "c"]},  # 600 MB from 96 bytes before
    {T: "ndarray", "dtype": "(100000,100000)f8", "shape": [1], "base64": ""},
    {T: "ndarray", "dtype": "V1000000000", "shape": [1], "base64": ""},
    {T: "ndarray", "dtype": {"names": ["a"], "formats": ["f8"]}, "shape": [1], "items": [1.0]},
    {T: "ndarray", "dtype": "<f8", "shape": [10 ** 12], "base64": ""},
    {T: "ndarray", "dtype": "<f8", "shape": [4], "base64": "AAAAAAAAAAA="},  # one item, shape of four
    {T: "ndarray", "dtype": "<f8", "shape": [1] * 40, "base64": "AAAAAAAAAAA="},
    {T: "ndarray", "dtype": "<f8", "shape": [True], "base64": "AAAAAAAAAAA="},
    {T: "ndarray", "dtype": "<i8", "shape": [2], "items": [1, "x"]},
    {T: "ndarray", "dtype": "object", "shape": [10 ** 9], "items": []},
    {T: "npscalar", "dtype": "O", "value": 1},
    {T: "tensor", "array": {T: "ndarray", "dtype": "object", "shape": [1], "items": [1]}},
    {T: "float", "value": ["1.0"]},
    {T: "omitted", "type": 3, "where": "x"},
])
def test_sizes_and_dtypes_are_checked_before_anything_is_allocated(entry):
    with pytest.raises(evidence.EvidenceError):
        evidence.decode(entry)


def test_deep_nesting_is_an_evidence_error_not_a_recursion_error():
    data: dict = {}
    inner = data
    for _ in range(5000):
        inner["a"] = [{}]
        inner = inner["a"][0]
    with pytest.raises(evidence.EvidenceError, match="nested"):
        evidence.decode(data)
    tagged = {T: "tuple", "items": []}
    for _ in range(5000):
        tagged = {T: "tuple", "items": [tagged]}
    with pytest.raises(evidence.EvidenceError, match="nested"):
        evidence.decode(tagged)


# ---- reading JSON


def test_read_json_refuses_a_fifo_and_a_device_at_once(tmp_path):
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)
    proc = _py(f"""
        from acl26 import io
        for p in ({str(fifo)!r}, "/dev/zero"):
            try:
                io.read_json(p)
            except OSError as exc:
                print(exc.filename, exc.strerror)
        """, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(str(fifo)) and "not a regular file" in lines[0]
    assert lines[1].startswith("/dev/zero") and "not a regular file" in lines[1]


def test_read_json_caps_the_size_and_turns_deep_nesting_into_a_value_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        io.read_json(deep)
    with pytest.raises(OSError, match="more than the 10"):
        io.read_json(deep, max_bytes=10)
    link = tmp_path / "link.json"
    link.symlink_to(deep)
    with pytest.raises(OSError, match="symbolic link"):
        io.read_json(link, follow_symlinks=False)


# ---- acl26 verify


CASES = all_cases()


@pytest.fixture()
def book(tmp_path, monkeypatch):
    """A tiny executed book (LoPT's synthetic results with their evidence), and a folder outside it."""
    executed = tmp_path / "executed"
    monkeypatch.setenv("ACL26_OUT", str(executed))
    ch = registry.get("lopt")
    ledger = C.Ledger(ch.id, "book", list(ch.claims), record_claims=ch.record_claims)
    res = CASES["lopt"][0]()
    ch.record_claims(ledger, res)
    ledger.save(evidence=res)
    io.write_text(executed / "lopt.ipynb", "{}")
    provenance.write_manifest(executed)
    outside = tmp_path / "outside"
    outside.mkdir()
    return executed, outside


def _manifest(executed: Path, files: dict) -> None:
    (executed / provenance.MANIFEST).write_text(json.dumps({"written": "now", "files": files}))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hostile_results(path: Path, marker: Path) -> None:
    data = json.loads(path.read_text())
    data["evidence"]["speedup"] = _hostile(marker)[0]
    path.write_text(json.dumps(data))


def test_verify_decodes_no_results_file_the_manifest_does_not_list(book, capsys):
    executed, outside = book
    marker = outside / "pwned"
    planted = executed / "results" / "lopt-smoke.json"
    planted.write_text((executed / "results" / "lopt-book.json").read_text())
    _hostile_results(planted, marker)
    assert cli.main(["verify", str(executed)]) == 2
    out = capsys.readouterr().out
    assert "lopt-smoke.json: not in the manifest" in out and not marker.exists()
    assert "lopt-smoke.json: verdicts" not in out


def test_verify_runs_nothing_a_listed_results_file_names(book, capsys):
    executed, outside = book
    marker = outside / "pwned"
    _hostile_results(executed / "results" / "lopt-book.json", marker)
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2
    err = capsys.readouterr().err
    assert "lopt-book.json: verdicts cannot be decided again" in err and "not a type evidence may hold" in err
    assert not marker.exists()


@pytest.mark.parametrize("key", ["../outside/secret.json", "/etc/hostname", "results/../../outside/secret.json",
                                 "results/./lopt-book.json", "secret.txt", "runs/a/b.json", ""])
def test_verify_reads_nothing_outside_its_folder_through_the_manifest(book, capsys, key):
    executed, outside = book
    secret = outside / "secret.json"
    secret.write_text("{}")
    target = Path("/etc/hostname") if key == "/etc/hostname" else secret
    files = json.loads((executed / provenance.MANIFEST).read_text())["files"]
    files[key] = _sha(target) if target.is_file() else "0" * 64  # the right digest: no hash oracle either
    _manifest(executed, files)
    assert cli.main(["verify", str(executed)]) == 2
    out = capsys.readouterr().out
    assert f"the entry {key!r}" in out and "nothing was read there" in out


def test_verify_follows_no_symbolic_link(book, capsys):
    executed, outside = book
    (outside / "nb.ipynb").write_text("{}")
    (executed / "lopt.ipynb").unlink()
    (executed / "lopt.ipynb").symlink_to(outside / "nb.ipynb")  # same bytes, same digest: was accepted
    (outside / "runs").mkdir()
    (outside / "runs" / "lopt.json").write_text("{}")
    (executed / "runs").symlink_to(outside / "runs")
    assert cli.main(["verify", str(executed)]) == 2
    out = capsys.readouterr().out
    assert "the entry 'lopt.ipynb' is a symbolic link" in out
    assert f"{executed / 'runs'}: a symbolic link where the book keeps its files" in out


def test_a_hostile_folder_ends_in_one_line_in_seconds(book):
    executed, outside = book
    results = executed / "results"
    (results / "lopt-book.json").unlink()
    os.mkfifo(results / "lopt-book.json")  # listed in the manifest: was opened and read, and hung
    os.mkfifo(results / "x.json")
    (results / "zero.json").symlink_to("/dev/zero")
    proc = subprocess.run([str(Path(sys.executable).parent / "acl26"), "verify", str(executed)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("acl26: error: ") and str(executed) in err[0]
    assert "the entry 'results/lopt-book.json' is not a regular file" in proc.stdout
    assert "x.json: not a regular file" in proc.stdout and "zero.json: a symbolic link" in proc.stdout


def test_verify_names_a_manifest_that_is_not_a_regular_file(book):
    executed, _ = book
    (executed / provenance.MANIFEST).unlink()
    os.mkfifo(executed / provenance.MANIFEST)  # was opened and read: it hung
    proc = subprocess.run([str(Path(sys.executable).parent / "acl26"), "verify", str(executed)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "MANIFEST.json: no usable manifest (not a regular file" in proc.stderr


@pytest.mark.parametrize("change", [
    lambda d: d.update(paper="../../etc"), lambda d: d.update(paper=["lopt"]), lambda d: d.update(claims="x"),
    lambda d: d.update(params=[1]), lambda d: d.update(evidence=[[[[]]]] * 2),
])
def test_verify_names_a_results_file_of_the_wrong_shape(book, capsys, change):
    executed, _ = book
    path = executed / "results" / "lopt-book.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2
    err = capsys.readouterr().err
    assert "lopt-book.json" in err and "internal error" not in err


# ---- the run box


def _run_record(executed: Path, **fields) -> Path:
    record = {"paper": "lopt", "profile": "book", "params": {"seed": 0}, "wall_s": 12.0,
              "finished": "2026-12-06T00:00:00+00:00", "key": "0123456789abcdef",
              "git": {"commit": "a" * 40, "dirty": False},
              "machine": {"cpu": "Intel(R) Xeon(R)", "cores": 2, "bf16_native": True}}
    record.update(fields)
    path = executed / "runs" / "lopt.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def test_the_run_box_turns_no_record_field_into_markup(tmp_path):
    _run_record(tmp_path, machine={"cpu": "<script>alert(1)</script> | `x` {raw}`html`", "cores": 2,
                                   "bf16_native": False},
                params={"seed": "```\n<script>alert(2)</script>", "texts": ["a`b"]})
    box = provenance.run_box("lopt", tmp_path)
    assert "<script>alert(1)" not in box and "{raw}`" not in box  # the table's text is escaped
    fence = box.split("bash\n")[0].rsplit("\n", 1)[-1]
    assert set(fence) == {"`"} and len(fence) >= 4  # longer than any backtick run in the command
    assert box.count(fence) == 2  # what the command holds stays inside its code block, as text


@pytest.mark.parametrize("fields", [
    {"git": "abc"}, {"git": {"commit": "<b>x</b>", "dirty": False}}, {"machine": ["cpu"]},
    {"machine": {"cpu": "x", "cores": "2"}}, {"wall_s": "12"}, {"wall_s": float("nan")}, {"key": "`rm`"},
    {"params": {"a\n```\n<script>": 1}}, {"params": ["seed"]}, {"finished": "soon"},
    {"wall_s": 10 ** 400},  # float() of it overflowed: an internal error before
])
def test_the_run_box_refuses_a_record_of_the_wrong_shape_in_one_line(tmp_path, fields):
    path = _run_record(tmp_path, **fields)
    with pytest.raises(RunError, match=f"{path}: not a usable run record.*acl26 run lopt"):
        provenance.run_box("lopt", tmp_path)


# ---- the ownership ledger under concurrent writers


@pytest.mark.parametrize("fs", ["local", "nfs"])
def test_concurrent_writers_into_one_folder_lose_no_ledger_entry(tmp_path, fs):
    """Three processes write 150 files each into one folder; on "nfs", flock on a folder fails with EBADF
    (as NFS's emulation of flock does), so the lock falls back to a file."""
    code = """
        import errno, fcntl, os, stat, sys
        from acl26 import io
        if sys.argv[3] == "nfs":
            real = fcntl.flock
            def flock(fd, op):
                if stat.S_ISDIR(os.fstat(fd).st_mode):
                    raise OSError(errno.EBADF, os.strerror(errno.EBADF))
                return real(fd, op)
            fcntl.flock = flock
        for i in range(150):
            io.write_text(f"{sys.argv[1]}/{sys.argv[2]}-{i}.txt", "x")
        """
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(tmp_path), tag, fs]) for tag in "abc"]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    files = sorted(tmp_path.glob("*.txt"))
    assert len(files) == 450
    foreign = [f.name for f in files if not io.owned_file(f)]
    assert foreign == []
    assert (tmp_path / io.LEDGER_LOCK).exists() == (fs == "nfs")


# ---- a full disk names the file


def test_a_write_error_without_a_file_name_names_the_target(tmp_path, monkeypatch):
    import errno

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    target = tmp_path / "out" / "table.json"
    with pytest.raises(OSError) as info:
        io.write_json(target, {"a": 1})
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert cli.one_line(info.value).startswith(f"{target}: No space left on device")
    assert not target.exists()
    with pytest.raises(OSError) as info:
        with io.atomic_dir(tmp_path / "folder") as tmp:
            (tmp / "f").write_text("x")
            os.fsync(0)
    assert info.value.filename == str(tmp_path / "folder")


# ---- staging folders a killed process left


def _killed_inside(code_inside: str, tmp_path: Path) -> None:
    code = f"""
        import os, signal
        from pathlib import Path
        from acl26 import io
        {code_inside}
        """
    proc = _py(code, cwd=tmp_path)
    assert proc.returncode == -9, proc.stderr


def test_the_next_write_removes_a_killed_writers_staging_folder(tmp_path):
    _killed_inside("""with io.atomic_dir(Path("model")) as tmp:
            (tmp / "weights.bin").write_bytes(b"x" * 1000)
            os.kill(os.getpid(), signal.SIGKILL)""", tmp_path)
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".model.") and left[0].endswith(".tmp")
    with io.atomic_dir(tmp_path / "model") as tmp:
        (tmp / "weights.bin").write_bytes(b"y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert io.owned_dir(tmp_path / "model")


def test_the_next_run_removes_a_killed_runs_staging_folder(tmp_path):
    _killed_inside("""with io.staging(Path("."), "lopt") as tmp:
            (tmp / "lopt.ipynb").write_text("{}")
            os.kill(os.getpid(), signal.SIGKILL)""", tmp_path)
    (left,) = tmp_path.iterdir()
    assert left.name.startswith(".lopt-") and left.name.endswith(".run")
    with io.staging(tmp_path, "lopt") as tmp:
        assert tmp.is_dir() and not left.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_live_staging_folder_and_a_users_folder_are_left_alone(tmp_path):
    user = tmp_path / ".model.abcdefgh.tmp"  # named like a staging folder, but no marker: the user's
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    with io.atomic_dir(tmp_path / "model") as tmp:
        assert io.reap_stale(tmp_path) == [] and tmp.is_dir()  # alive: its marker is locked
        (tmp / "f").write_text("x")
    assert (user / "notes.txt").read_text() == "mine"


def test_a_target_moved_aside_by_a_killed_writer_is_put_back(tmp_path):
    with io.atomic_dir(tmp_path / "model") as tmp:
        (tmp / "f").write_text("old")
    staging = tmp_path / ".model.abcdefgh.tmp"  # killed between its two renames: the new one still staged
    staging.mkdir()
    (staging / io.STAGING_MARKER).write_text("")
    (staging / "f").write_text("new")
    os.replace(tmp_path / "model", tmp_path / ".model.abcdefgh.old")
    io.reap_stale(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert (tmp_path / "model" / "f").read_text() == "old" and io.owned_dir(tmp_path / "model")


def test_the_next_fetch_removes_a_killed_fetchs_staging_folder(tmp_path, monkeypatch):
    from acl26 import assets

    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    manifest = assets.load_manifest()
    name = next(iter(manifest))
    root = manifest[name].dir.parent
    _killed_inside(f"""with io.atomic_dir(Path({str(manifest[name].dir)!r})) as tmp:
            (tmp / "package.json").write_text("{{}}")
            os.kill(os.getpid(), signal.SIGKILL)""", tmp_path)
    (left,) = root.iterdir()
    assert left.name.startswith(f".{name}.") and left.name.endswith(".tmp")
    monkeypatch.setattr(assets, "is_cached", lambda asset: True)  # nothing to download: only the clean-up runs
    assets.fetch([name], manifest=manifest, progress=False)
    assert list(root.iterdir()) == []


def test_a_users_folders_named_like_an_old_target_are_left_alone(tmp_path):
    """Folders named like atomic_dir's moved-aside targets (.<name>.<8>.old) that no abandoned staging
    marker vouches for: kept where they are, whether the target exists or not (one was deleted, the
    other renamed onto the target, before)."""
    with io.atomic_dir(tmp_path / "model") as tmp:
        (tmp / "f").write_text("x")
    for name in (".model.backup01.old", ".lopt.20240101.old"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_text("mine")
    with io.atomic_dir(tmp_path / "model", overwrite=True) as tmp:
        (tmp / "f").write_text("y")
    with io.staging(tmp_path, "lopt"):
        pass
    assert io.reap_stale(tmp_path) == []
    for name in (".model.backup01.old", ".lopt.20240101.old"):
        assert (tmp_path / name / "notes.txt").read_text() == "mine"
    assert not (tmp_path / "lopt").exists()


def test_an_old_target_left_after_the_new_one_landed_is_removed(tmp_path):
    with io.atomic_dir(tmp_path / "model") as tmp:
        (tmp / "f").write_text("new")
    (tmp_path / "model" / io.STAGING_MARKER).write_text("")  # killed after the swap: its marker still there
    old = tmp_path / ".model.abcdefgh.old"
    old.mkdir()
    (old / "f").write_text("old")
    assert io.reap_stale(tmp_path) == [old]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
    assert (tmp_path / "model" / "f").read_text() == "new" and io.owned_dir(tmp_path / "model")
    assert not (tmp_path / "model" / io.STAGING_MARKER).exists()


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_bookkeeping_that_is_not_a_regular_file_is_no_record_and_never_waited_on(tmp_path, kind):
    folder = tmp_path / "out"
    folder.mkdir()
    for name in (io.FILE_LEDGER, io.DIR_MARKER):
        where = folder / name
        {"fifo": os.mkfifo, "dev-zero": lambda p: p.symlink_to("/dev/zero"), "folder": os.mkdir}[kind](where)
    proc = _py(f"""
        from pathlib import Path
        from acl26 import io
        folder = Path({str(folder)!r})
        print(io.owned_file(folder / "x"), io.owned_dir(folder))
        try:
            io.write_text(folder / "x.txt", "a")
            print(io.owned_file(folder / "x.txt"))
        except OSError as exc:  # a folder where the ledger goes: it is not replaced, the write fails naming it
            print(exc.filename2 or exc.filename)
        """, timeout=60)
    assert proc.returncode == 0, proc.stderr
    expect = str(folder / io.FILE_LEDGER) if kind == "folder" else "True"
    assert proc.stdout.split() == ["False", "False", expect]
    assert (folder / io.FILE_LEDGER).is_dir() == (kind == "folder")


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", "\xff\xfe"])
def test_the_run_box_names_a_run_record_that_cannot_be_read(tmp_path, text):
    path = tmp_path / "runs" / "lopt.json"
    path.parent.mkdir()
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(RunError, match=f"{path}: not a usable run record.*acl26 run lopt"):
        provenance.run_box("lopt", tmp_path)


# ---- verify's budgets: the evidence decides how much work record_claims does


def test_deciding_again_is_stopped_past_its_time(book, monkeypatch):
    import time as _time

    executed, _ = book
    monkeypatch.setattr(provenance, "REDERIVE_S", 1.0)
    monkeypatch.setattr(provenance, "rederive", lambda result: _time.sleep(600))  # the forked child runs this
    started = _time.monotonic()
    problems, checked, _ = provenance.verify(executed)
    assert _time.monotonic() - started < 60
    assert checked == 0 and any("took longer than the 1 s verify allows" in p for p in problems)


def test_deciding_again_is_stopped_past_its_memory(book, monkeypatch):
    executed, _ = book
    monkeypatch.setattr(provenance, "REDERIVE_BYTES", 1 << 30)

    def hog(result):
        return [bytearray(256 << 20) for _ in range(64)]  # 16 GiB

    monkeypatch.setattr(provenance, "rederive", hog)
    problems, _, _ = provenance.verify(executed)
    assert any("more than the 1073741824 bytes of memory verify allows" in p for p in problems), problems


def test_model_interpolation_evidence_with_a_huge_resample_count_ends_in_time(tmp_path, monkeypatch):
    executed = tmp_path / "executed"
    monkeypatch.setenv("ACL26_OUT", str(executed))
    monkeypatch.setattr(provenance, "REDERIVE_S", 5.0)
    ch = registry.get("model_interpolation")
    ledger = C.Ledger(ch.id, "book", list(ch.claims), record_claims=ch.record_claims)
    res = CASES["model_interpolation"][0]()
    ch.record_claims(ledger, res)
    ledger.save(evidence=res)
    path = executed / "results" / "model_interpolation-book.json"
    data = json.loads(path.read_text())
    assert "n_resamples" in data["evidence"]
    data["evidence"]["n_resamples"] = 10 ** 9  # ran for hours
    path.write_text(json.dumps(data))
    provenance.write_manifest(executed)
    problems, _, _ = provenance.verify(executed)
    assert any("took longer than the 5 s verify allows" in p for p in problems), problems


def test_verify_decodes_only_results_files_named_for_a_chapter_and_profile(book, capsys):
    executed, _ = book
    results = executed / "results"
    (results / "x.json").write_text((results / "lopt-book.json").read_text())  # a chapter's file, another name
    (results / "sherry-book.json").write_text((results / "lopt-book.json").read_text())  # names another chapter
    provenance.write_manifest(executed, overwrite=True)
    assert cli.main(["verify", str(executed)]) == 2
    out = capsys.readouterr().out
    assert "x.json: not named <chapter>-<profile>.json" in out
    assert "sherry-book.json: its 'paper' and 'profile' are not those its name gives (sherry, book)" in out


def test_verify_hashes_a_bounded_total(book, capsys, monkeypatch):
    executed, _ = book
    monkeypatch.setattr(provenance, "MAX_TOTAL_HASHED", 100)
    assert cli.main(["verify", str(executed)]) == 2
    assert "hold more than the 100 bytes verify hashes in all" in capsys.readouterr().out


def test_verify_writes_every_problem_as_one_line_of_plain_text(book, capsys):
    executed, _ = book
    (executed / "results" / "evil\n\x1b[1;32mall good\x1b[0m.json").write_text("{}")
    files = json.loads((executed / provenance.MANIFEST).read_text())["files"]
    files["results/\ud800.json"] = "0" * 64
    _manifest(executed, files)
    assert cli.main(["verify", str(executed)]) == 2
    cap = capsys.readouterr()
    lines = cap.out.splitlines()
    assert all(ln.startswith("FAILED: ") for ln in lines) and "\x1b" not in cap.out + cap.err
    assert any("evil\\n\\x1b[1;32mall good" in ln and "not in the manifest" in ln for ln in lines)
    assert any("the entry 'results/\\ud800.json' is not a file name in UTF-8" in ln for ln in lines)
