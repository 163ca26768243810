"""acl26 sweep's fault cases (issue 38): it never waits silently (no SLURM, no worker with the GPUs asked for),
every option is checked before anything runs, a sweep's size is bounded before it is planned, a points file is
untrusted input (size, kind of file, YAML aliases, duplicate keys), a sweep never replaces or appends to a
failure record or log that acl26 did not write, and ``sweep collect`` never reads outside its folder.

No test needs SLURM or a GPU: ``sbatch`` is hidden through ``shutil.which``, the Dask cluster is a local one
without GPU resources or a fake client. A case that hung before the fix runs in a subprocess whose timeout is
only a safety net; the tests assert on the message and the exit status, never on a duration."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future
from pathlib import Path

import pytest

from acl26 import cli, execution, io, sweep

ROOT = Path(__file__).resolve().parents[1]
DRY = ("sweep", "lopt", "--profile", "smoke", "--grid", "seed=0,1", "--dry-run")


def _main(*argv) -> int:
    return cli.main([str(a) for a in argv])


def _one_error_line(err: str) -> str:
    """The command's last stderr line, checked to be its only error line."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines and sum(ln.startswith("acl26: error:") for ln in lines) == 1, err
    assert lines[-1].startswith("acl26: error:"), err
    return lines[-1]


def _process(*argv, timeout: float = 180) -> subprocess.CompletedProcess:
    """``acl26 ARGV`` in a child process, with at most 2 GiB of address space (a file read for ever fails
    there instead of filling the machine's memory) and a timeout that is only a safety net against a hang."""

    def limits():  # pragma: no cover - runs in the child
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "acl26.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=limits, env=env, cwd=ROOT)


class _Recorder:
    """An executor that runs nothing: every point 'finishes' with ``outcome`` (after ``before(log)``)."""

    def __init__(self, outcome, before=None):
        self.outcome, self.before, self.seen = outcome, before, []

    def submit(self, commands, cwd, log, name, alone=False):
        self.seen.append(log)
        if self.before is not None:
            self.before(log)
        f = Future()
        f.set_result(dict(self.outcome))
        return f

    as_completed = staticmethod(lambda futures: futures)

    def close(self):
        pass


# ---- 3. never waiting silently: SLURM without sbatch, Dask without the GPUs asked for


def test_slurm_without_sbatch_fails_in_one_line_before_anything_starts(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: None)

    def no_cluster(**kwargs):
        raise AssertionError("a SLURMCluster was started without sbatch")

    monkeypatch.setattr(sweep, "slurm_cluster", no_cluster)
    assert _main("sweep", "lopt", "--profile", "smoke", "--grid", "seed=0", "--on", "slurm", "--out",
                 tmp_path / "sw", "-q") == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "--on slurm" in line and "sbatch" in line
    assert not (tmp_path / "sw").exists()


def test_the_slurm_cluster_itself_refuses_to_start_without_sbatch(monkeypatch):
    pytest.importorskip("dask_jobqueue", reason="the [cluster] extra (dask-jobqueue) is not installed")
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **k: None)
    with pytest.raises(sweep.SweepError, match="sbatch"):
        cluster = sweep.slurm_cluster(scale=True)
        cluster.close()  # only reached by the old code, which started it


class _FakeClient:
    """A Dask client whose scheduler reports ``rounds`` of workers, one list per call, the last one repeated."""

    def __init__(self, *rounds):
        self.rounds, self.calls = list(rounds), 0

    def scheduler_info(self, n_workers=-1):
        got = self.rounds[min(self.calls, len(self.rounds) - 1)]
        self.calls += 1
        return {"workers": {f"tcp://w{i}:1": {"resources": r, "nthreads": 1} for i, r in enumerate(got)}}


def test_a_dask_sweep_says_it_waits_for_a_worker_with_the_gpus_then_goes_on(capsys):
    client = _FakeClient([{}], [{}, {"GPU": 2}])
    assert sweep.wait_for_workers(client, gpus=1, timeout_s=60, where="dask://head:8786", poll_s=0) == 1
    err = capsys.readouterr().err
    assert "waiting" in err and "GPU=1" in err and "60 s" in err and client.calls == 2


@pytest.mark.parametrize("workers,want", [([], "no Dask worker"), ([{}, {"GPU": 1}], "GPU=2")])
def test_a_dask_sweep_gives_up_in_one_line_when_no_worker_offers_what_it_needs(workers, want):
    with pytest.raises(sweep.SweepError, match=want) as got:
        sweep.wait_for_workers(_FakeClient(workers), gpus=2 if workers else 0, timeout_s=0, where="dask://head:8786")
    assert "dask://head:8786" in str(got.value) and "--worker-timeout" in str(got.value)


def test_dask_gpus_with_no_gpu_worker_waits_out_loud_and_ends_in_one_line(tmp_path, capsys):
    distributed = pytest.importorskip("distributed", reason="the [cluster] extra (Dask distributed) is not installed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None) as cluster:
        on = "dask://" + cluster.scheduler_address.removeprefix("tcp://")
        code = _main("sweep", "lopt", "--profile", "smoke", "--grid", "seed=0", "--on", on, "--gpus", "1",
                     "--worker-timeout", "0.5", "--out", tmp_path / "sw", "-q")
    err = capsys.readouterr().err
    assert code == 2
    line = _one_error_line(err)
    assert on in line and "GPU=1" in line and "--worker-timeout" in line
    assert "waiting" in err
    assert not (tmp_path / "sw" / "main" / "lopt" / "failed").exists()


@pytest.mark.parametrize("on", ["local[1]", "dask://head:8786", "slurm"])
def test_negative_gpus_are_refused_for_every_executor(on, capsys):
    assert _main(*DRY, "--on", on, "--gpus", "-1") == 2
    assert "--gpus" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_worker_timeout_is_refused(value, capsys):
    assert _main(*DRY, "--on", "dask://head:8786", "--worker-timeout", value) == 2
    assert "--worker-timeout" in _one_error_line(capsys.readouterr().err)


# ---- 3. a sweep's size is bounded before it is planned


@pytest.fixture
def no_planning(monkeypatch):
    """Planning a point (its cache key) fails the test: a refused sweep must be refused before that."""

    def planned(*args, **kwargs):
        raise AssertionError("a point was planned")

    monkeypatch.setattr(execution, "notebook_key", planned)


def test_a_huge_grid_is_refused_before_a_single_point_is_planned(no_planning, tmp_path):
    values = ",".join(str(i) for i in range(1000))
    with pytest.raises(sweep.SweepError, match=r"1,000,000 points .*10,000.*--max-points"):
        sweep.plan("lopt", "smoke", grid=[f"seed={values}", f"trials={values}"], out=tmp_path)
    assert sweep.MAX_POINTS == 10_000


def test_the_limit_counts_the_points_file_times_the_grid_and_max_points_raises_it(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text("- {trials: 2}\n- {trials: 3}\n")
    args = ("sweep", "lopt", "--profile", "smoke", "--points", f, "--grid", "seed=0,1,2", "--out", tmp_path / "sw",
            "--dry-run")
    assert _main(*args, "--max-points", "5") == 2
    line = _one_error_line(capsys.readouterr().err)
    assert "6 points" in line and "--max-points" in line
    assert _main(*args, "--max-points", "6") == 0
    assert "6 points of lopt" in capsys.readouterr().out
    assert _main(*args, "--max-points", "0") == 2
    assert "--max-points" in _one_error_line(capsys.readouterr().err)


# ---- 3. a points file is untrusted input


BOMB = "".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
               for p, c in zip(" abcdefgh", "abcdefghi"))


@pytest.mark.parametrize("text,match", [
    (BOMB, r"line 1: .*alias"),                                        # 1.3 KB, 9**9 'lol' once expanded
    ("- &p {seed: 0}\n- *p\n", r"line 1: .*alias"),
    ("- {seed: 0}\n- {seed: 0, trials: 2, seed: 1}\n", r"line 2: .*'seed' .*twice"),
    ("- seed: 0\n  trials: 2\n  seed: 1\n", r"line 3: .*'seed' .*twice"),
    ("points:\n  - {seed: 0}\npoints:\n  - {seed: 1}\n", r"line 3: .*'points' .*twice"),
    ("- {<<: {seed: 0}, trials: 2}\n", r"line 1: .*merge"),
    ("- {seed: 2020-13-45}\n", r"2020-13-45|month"),
    ("- {trials: " + "[" * 3000 + "]" * 3000 + "}\n", r"nested"),
])
def test_a_points_file_with_aliases_duplicates_or_garbage_is_one_line_naming_it(tmp_path, text, match):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(sweep.SweepError, match=match) as got:
        sweep.read_points(f)
    assert str(got.value).startswith(f"--points {f}:") and "\n" not in str(got.value)


def test_a_points_file_over_the_size_cap_is_refused_unread(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("#" * sweep.MAX_POINTS_FILE_BYTES + "\n- {seed: 0}\n")
    with pytest.raises(sweep.SweepError, match=r"--points .*bytes, more than the 1048576 read here"):
        sweep.read_points(f)
    assert sweep.MAX_POINTS_FILE_BYTES == 1 << 20


def test_fifos_and_devices_as_points_files_are_refused_by_name_without_reading_them(tmp_path):
    fifo = tmp_path / "points.fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        proc = _process(*DRY, "--points", path)
        assert proc.returncode == 2, proc.stderr
        line = _one_error_line(proc.stderr)
        assert f"--points {path}:" in line and "not a regular file" in line


def test_any_text_as_a_points_file_reads_or_fails_in_one_line_naming_it():
    from hypothesis import given, settings, strategies as st

    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "p.yaml"

        @settings(max_examples=200, deadline=None)
        @given(st.text(alphabet="-[]{}:,&*!<>|'\"#% \n\tab01.e2T", max_size=60))
        def check(text):
            f.write_text(text, encoding="utf-8")
            try:
                points = sweep.read_points(f)
            except sweep.SweepError as exc:
                assert str(exc).startswith(f"--points {f}:") and "\n" not in str(exc)
            else:
                assert points and all(isinstance(p, dict) for p in points)

        check()


# ---- 3. names and SLURM options, checked up front


def test_a_name_with_a_trailing_newline_is_refused(tmp_path, capsys):
    with pytest.raises(sweep.SweepError, match="--name"):
        sweep.plan("lopt", "smoke", name="main\n", out=tmp_path)
    assert _main(*DRY, "--name", "main\n", "--out", tmp_path) == 2
    assert "--name" in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("flag,value", [
    ("--slurm-time", "forever"), ("--slurm-time", "1:61:00"), ("--slurm-time", "01:00:00\n#SBATCH --exclusive"),
    ("--slurm-time", "0"), ("--slurm-cores", "0"), ("--max-jobs", "0"), ("--slurm-memory", "lots"),
    ("--slurm-memory", "16GB\n#SBATCH --exclusive"), ("--slurm-partition", "gpu\n#SBATCH --exclusive"),
    ("--slurm-account", "lab\x07"), ("--slurm-partition", ""),
])
def test_bad_slurm_options_are_refused_before_anything(flag, value, capsys):
    assert _main(*DRY, "--on", "slurm", flag, value) == 2
    assert flag in _one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize("walltime", ["30", "30:00", "04:00:00", "100:00:00", "2-12", "2-12:30", "2-12:30:00"])
def test_slurm_time_formats_are_accepted(walltime, capsys):
    assert _main(*DRY, "--on", "slurm", "--slurm-time", walltime, "--slurm-memory", "64GB", "--slurm-cores", "16",
                 "--slurm-partition", "gpu", "--slurm-account", "lab-1") == 0


def test_the_slurm_cluster_refuses_a_bad_option_from_python_too():
    with pytest.raises(sweep.SweepError, match="--slurm-time"):
        sweep.slurm_cluster(walltime="forever", scale=False)
    with pytest.raises(sweep.SweepError, match="--slurm-partition"):
        sweep.slurm_cluster(partition="gpu\n#SBATCH --exclusive", scale=False)


@pytest.mark.parametrize("on", ["dask://head:99999", "dask://head:0", "dask://he\x01ad:8786"])
def test_a_dask_address_needs_a_real_port_and_host(on, capsys):
    assert _main(*DRY, "--on", on) == 2
    assert "--on" in _one_error_line(capsys.readouterr().err)


# ---- 4. failure records and logs that acl26 did not write


def _plan(tmp_path, monkeypatch, grid="seed=0"):
    monkeypatch.chdir(tmp_path)
    return sweep.plan("lopt", "smoke", grid=[grid], out="sw", root=ROOT)


FAILED = {"rc": 2, "error": "acl26: error: boom", "wall_s": 0.0, "host": "here"}


@pytest.mark.parametrize("which", ["failed_record", "log"])
def test_a_users_failure_record_or_log_in_the_way_stops_the_sweep_before_it_runs_and_stays_as_it_was(
        tmp_path, monkeypatch, which):
    plan = _plan(tmp_path, monkeypatch)
    target = getattr(plan, which)(plan.points[0])
    target.parent.mkdir(parents=True)
    target.write_bytes(b"mine\n")
    rec = _Recorder(FAILED)
    with pytest.raises(io.OutputExistsError, match=str(target)):
        sweep.run_sweep(plan, executor=rec, progress=False, say=lambda line: None)
    assert rec.seen == [] and target.read_bytes() == b"mine\n"


def test_a_users_failure_record_that_appears_meanwhile_is_kept_and_the_point_says_why(tmp_path, monkeypatch):
    plan = _plan(tmp_path, monkeypatch)
    record = plan.failed_record(plan.points[0])

    def users_file(log):
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_bytes(b"my notes\n")

    res = sweep.run_sweep(plan, executor=_Recorder(FAILED, users_file), progress=False, say=lambda line: None)
    assert [o.status for o in res.outcomes] == ["failed"]
    assert "boom" in res.outcomes[0].error and str(record) in res.outcomes[0].error
    assert record.read_bytes() == b"my notes\n"


def test_a_sweeps_own_failure_record_is_replaced_by_the_next_try(tmp_path, monkeypatch):
    plan = _plan(tmp_path, monkeypatch)
    for error in ("first", "second"):
        sweep.run_sweep(plan, executor=_Recorder({**FAILED, "error": error}), progress=False, say=lambda line: None)
        assert io.read_json(plan.failed_record(plan.points[0]))["error"] == error


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_point_never_appends_to_a_log_acl26_did_not_write(tmp_path, kind):
    log = tmp_path / "logs" / "k.log"
    log.parent.mkdir()
    mine = tmp_path / "mine.txt"
    mine.write_bytes(b"my log\n")
    if kind == "file":
        shutil.copy(mine, log)
    else:
        log.symlink_to(mine)
    marker = tmp_path / "ran"
    got = sweep.execute([[sys.executable, "-c", f"open({str(marker)!r}, 'w')"]], str(tmp_path), str(log), threads=1)
    assert got["rc"] != 0 and str(log) in got["error"]
    assert not marker.exists()  # refused before the point ran
    assert mine.read_bytes() == b"my log\n" and (kind == "symlink" or log.read_bytes() == b"my log\n")


def test_a_points_own_log_is_replaced_by_its_next_try(tmp_path):
    log = tmp_path / "logs" / "k.log"
    for word in ("first", "second"):
        got = sweep.execute([[sys.executable, "-c", f"print({word!r})"]], str(tmp_path), str(log), threads=1)
        assert got["rc"] == 0 and io.owned_file(log)
        assert word in log.read_text() and ("first" not in log.read_text() or word == "first")


# ---- collect: a record is untrusted, and nothing outside DIR is read


def _point(folder: Path, run: dict | None = None, results: dict | None = None) -> Path:
    point = folder / "main" / "lopt" / ("a" * 16)
    io.write_json(point / "runs" / "lopt.json", run or {"paper": "lopt", "profile": "smoke", "key": "a" * 64,
                                                        "params": {"seed": 0}, "wall_s": 1.0})
    io.write_json(point / "results" / "lopt-smoke.json", results or {"claims": [{"id": "exact", "holds?": "yes",
                                                                                 "value": 1.0}], "metrics": {"n": 3}})
    return point


SECRET = {"claims": [{"id": "secret", "holds?": "yes", "value": 42.0}], "metrics": {"secret": 42}}


def test_collect_never_reads_a_results_file_outside_dir_through_a_records_paper(tmp_path):
    io.write_json(tmp_path / "secret-smoke.json", SECRET)
    folder = tmp_path / "dir"
    _point(folder, run={"paper": "../../../../../secret", "profile": "smoke", "key": "a" * 64, "params": {}})
    with pytest.raises(sweep.SweepError, match=r"runs/lopt.json.*'paper'"):
        sweep.collect_rows(folder)


@pytest.mark.parametrize("paper,profile", [("nope", "smoke"), ("lopt", "../x"), (["lopt"], "smoke")])
def test_collect_takes_only_a_known_chapter_and_a_plain_profile_from_a_record(tmp_path, paper, profile):
    point = _point(tmp_path, run={"paper": paper, "profile": profile, "key": "a" * 64, "params": {}})
    named = point / "results" / f"{paper}-{profile}.json"  # the file such a record names, there to be read
    named.parent.mkdir(parents=True, exist_ok=True)
    named.write_text(json.dumps(SECRET))
    with pytest.raises(sweep.SweepError, match=r"runs/lopt.json"):
        sweep.collect_rows(tmp_path)


@pytest.mark.parametrize("which", ["run", "results", "runs folder", "failed"])
def test_collect_does_not_follow_a_symbolic_link_out_of_dir(tmp_path, which):
    outside = tmp_path / "outside"
    io.write_json(outside / "lopt-smoke.json", SECRET)
    io.write_json(outside / "lopt.json", {"paper": "lopt", "profile": "smoke", "key": "b" * 64, "params": {}})
    io.write_json(outside / "f.json", {"paper": "lopt", "profile": "smoke", "key": "c" * 64, "error": "x"})
    folder = tmp_path / "dir"
    point = _point(folder)
    if which == "run":
        (point / "runs" / "lopt.json").unlink()
        (point / "runs" / "lopt.json").symlink_to(outside / "lopt.json")
    elif which == "results":
        (point / "results" / "lopt-smoke.json").unlink()
        (point / "results" / "lopt-smoke.json").symlink_to(outside / "lopt-smoke.json")
    elif which == "runs folder":
        shutil.rmtree(point / "runs")
        (point / "runs").symlink_to(outside, target_is_directory=True)
    else:
        (folder / "main" / "lopt" / "failed").mkdir()
        (folder / "main" / "lopt" / "failed" / ("c" * 16 + ".json")).symlink_to(outside / "f.json")
    with pytest.raises(sweep.SweepError, match="outside"):
        sweep.collect_rows(folder)


@pytest.mark.parametrize("run,results", [
    ({"paper": "lopt", "profile": "smoke", "key": "a" * 64, "params": [1, 2]}, None),
    (None, {"claims": ["exact"], "metrics": {}}),
    (None, {"claims": [], "metrics": [1]}),
    (None, ["not", "an", "object"]),
])
def test_collect_with_a_garbage_record_is_one_line_naming_it(tmp_path, run, results, capsys):
    _point(tmp_path, run=run, results=results)
    assert _main("sweep", "collect", tmp_path) == 2
    line = _one_error_line(capsys.readouterr().err)
    assert str(tmp_path / "main" / "lopt" / ("a" * 16)) in line


@pytest.mark.parametrize("record", [{"paper": "lopt", "profile": "smoke", "key": "c" * 64, "params": "seed=0"},
                                    {"paper": "../../x", "profile": "smoke", "key": "c" * 64},
                                    {"paper": "lopt", "profile": "smoke", "key": "c" * 64, "error": ["x"]}])
def test_collect_with_a_garbage_failure_record_is_one_line_naming_it(tmp_path, record, capsys):
    failed = tmp_path / "main" / "lopt" / "failed" / ("c" * 16 + ".json")
    failed.parent.mkdir(parents=True)
    failed.write_text(json.dumps(record))
    assert _main("sweep", "collect", tmp_path) == 2
    assert str(failed) in _one_error_line(capsys.readouterr().err)


def test_collect_refuses_a_fifo_for_a_record_without_waiting_on_it(tmp_path):
    failed = tmp_path / "main" / "lopt" / "failed"
    failed.mkdir(parents=True)
    os.mkfifo(failed / ("c" * 16 + ".json"))
    proc = _process("sweep", "collect", tmp_path)
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert str(failed / ("c" * 16 + ".json")) in line and "not a regular file" in line


def test_a_local_sweep_owns_its_logs_and_failure_records_so_a_rerun_replaces_them(tmp_path, monkeypatch):
    """Four points on local[2], each a tiny fake ``acl26 run`` (no notebook); seed=1 fails. Every log is acl26's
    (in its folder's ledger, though the points ended concurrently), so the re-run replaces them all."""
    fake = tmp_path / "fake_acl26.py"
    fake.write_text("import sys\nprint('point', sys.argv[-1])\n"
                    "if 'seed=1' in sys.argv:\n"
                    "    print('acl26: error: seed 1 fails', file=sys.stderr)\n"
                    "    sys.exit(2)\n")
    monkeypatch.setattr(sweep, "_acl26", lambda: [sys.executable, str(fake)])
    plan = _plan(tmp_path, monkeypatch, grid="seed=0,1,2,3")
    for attempt in range(2):
        res = sweep.run_sweep(plan, "local[2]", progress=False, say=lambda line: None)
        assert sorted(o.status for o in res.outcomes) == ["failed", "ok", "ok", "ok"], attempt
        assert all(io.owned_file(plan.log(p)) for p in plan.points)
        assert [p.read_text().count("$ ") for p in map(plan.log, plan.points)] == [1, 1, 1, 1]  # the last try's
        failed = [p for p in plan.points if plan.failed_record(p).exists()]
        assert [p.overrides["seed"] for p in failed] == [1] and io.owned_file(plan.failed_record(failed[0]))
        assert "seed 1 fails" in io.read_json(plan.failed_record(failed[0]))["error"]


def test_the_readme_and_help_state_the_limits_the_code_uses(capsys):
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Running at scale", 1)[1].split("\n## ", 1)[0]
    assert f"more than {sweep.MAX_POINTS:,} are refused" in text and "--max-points N" in text
    assert f"at most {sweep.MAX_POINTS_FILE_BYTES >> 20} MiB" in text
    assert f"default {sweep.DASK_WAIT_S:g} s on Dask, {sweep.SLURM_WAIT_S:g} s on SLURM" in text
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["sweep", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"default {sweep.MAX_POINTS}" in help_text and "--max-points" in help_text
    assert f"default {sweep.DASK_WAIT_S:g}; SLURM {sweep.SLURM_WAIT_S:g}" in help_text


def test_a_dask_sweep_with_gpu_workers_runs_every_point_and_owns_its_logs(tmp_path, monkeypatch):
    """The Dask path end to end on a local cluster whose workers offer GPU=1 (no GPU is used): the sweep finds
    them, each point asks for one, and its log is written under the writers' rules."""
    distributed = pytest.importorskip("distributed", reason="the [cluster] extra (Dask distributed) is not installed")
    fake = tmp_path / "fake_acl26.py"
    fake.write_text("import sys\nprint('point', sys.argv[-1])\n")
    monkeypatch.setattr(sweep, "_acl26", lambda: [sys.executable, str(fake)])
    monkeypatch.setenv("ACL26_THREADS", "1")
    plan = _plan(tmp_path, monkeypatch, grid="seed=0,1,2")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, protocol="tcp",
                                  dashboard_address=None, resources={"GPU": 1}) as cluster:
        on = "dask://" + cluster.scheduler_address.removeprefix("tcp://")
        res = sweep.run_sweep(plan, on, gpus=1, progress=False, say=lambda line: None, worker_timeout=60)
    assert [o.status for o in res.outcomes] == ["ok", "ok", "ok"]
    assert all(io.owned_file(plan.log(p)) and "point" in plan.log(p).read_text() for p in plan.points)


def test_slurm_whose_job_never_starts_a_worker_says_so_and_gives_up_in_one_line(tmp_path, monkeypatch):
    """A fake ``sbatch`` that queues the job for ever: the sweep says it waits, then ends in one line."""
    pytest.importorskip("dask_jobqueue", reason="the [cluster] extra (dask-jobqueue) is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for cmd, text in (("sbatch", "echo 'Submitted batch job 4242'"), ("scancel", "true"), ("squeue", "true")):
        (bin_dir / cmd).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / cmd).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = _process(*DRY[:-1], "--on", "slurm", "--worker-timeout", "1", "--out", tmp_path / "sw", "-q")
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "--on slurm" in line and "no SLURM job started" in line and "--worker-timeout" in line
    assert "[acl26] waiting: slurm" in proc.stderr


def test_a_job_slurm_refuses_is_one_line_with_slurms_reason_not_a_traceback(tmp_path, monkeypatch):
    pytest.importorskip("dask_jobqueue", reason="the [cluster] extra (dask-jobqueue) is not installed")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\necho 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n")
    (bin_dir / "scancel").write_text("#!/bin/sh\ntrue\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = _process(*DRY[:-1], "--on", "slurm", "--slurm-partition", "nope", "--out", tmp_path / "sw", "-q")
    assert proc.returncode == 2, proc.stderr
    line = _one_error_line(proc.stderr)
    assert "--on slurm" in line and "invalid partition specified: nope" in line
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("call", [
    lambda: sweep.check_slurm(walltime="٠٢:٠٠:٠٠"), lambda: sweep.check_slurm(memory="１６GB"),
    lambda: sweep.parse_on("dask://host:٨٧٨٦"), lambda: sweep.parse_on("local[٣]"),
    lambda: sweep.check_max_points("１０"),
])
def test_numbers_in_options_are_ascii_digits(call):
    """Non-ASCII digits matched \\d (Arabic-Indic, fullwidth): none of them is a SLURM time, a size or a port."""
    with pytest.raises(sweep.SweepError):
        call()
