"""acl26 sweep: points from a grid and a YAML file, resumed, failures kept apart, run locally and on a Dask
LocalCluster with the same results, collected into one table; the SLURM job script without SLURM."""

import json
import sys
import time
from pathlib import Path

import pytest

from acl26 import cli, io, sweep

ROOT = Path(__file__).resolve().parents[1]


def _main(*argv) -> int:
    return cli.main(list(argv))


# ---- points and executors (no run)


def test_grid_is_the_product_of_its_flags_with_values_read_like_dash_p():
    got = sweep.parse_grid(["seed=0,1", "tag=a,b", "flag=true,False"])
    assert got[0] == {"seed": 0, "tag": "a", "flag": True} and len(got) == 2 * 2 * 2
    assert {p["flag"] for p in got} == {True, False}
    assert sweep.parse_grid([]) == [{}]


@pytest.mark.parametrize("bad,match", [("seed", "expected name=value"), ("seed=", "empty value"),
                                       ("seed=1,,2", "empty value"), ("seed=1,1", "repeated")])
def test_a_bad_grid_fails_in_one_line_naming_it(bad, match):
    with pytest.raises(sweep.SweepError, match=match):
        sweep.parse_grid([bad])
    with pytest.raises(sweep.SweepError, match="given twice"):
        sweep.parse_grid(["seed=1", "seed=2"])


def test_points_file_takes_whole_parameter_sets_and_combines_with_the_grid(tmp_path):
    f = tmp_path / "points.yaml"
    f.write_text("points:\n  - {speed_lengths: [100000]}\n  - {speed_lengths: [100000, 300000], trials: 2}\n")
    plan = sweep.plan("lopt", "smoke", grid=["seed=0,1"], points_file=f, out=tmp_path / "sw")
    assert len(plan.points) == 4
    assert {tuple(p.params["speed_lengths"]) for p in plan.points} == {(100000,), (100000, 300000)}
    assert len({p.key for p in plan.points}) == 4 and all(p.folder.parent == tmp_path / "sw" / "main" / "lopt"
                                                          for p in plan.points)
    # the same parameters twice are one point (one cache key)
    f.write_text("- {seed: 0}\n- {seed: 0}\n")
    assert len(sweep.plan("lopt", "smoke", points_file=f, out=tmp_path).points) == 1


@pytest.mark.parametrize("text,match", [("[1, 2]", "point 0 is not a mapping"), ("{}", "non-empty list"),
                                        ("a: [", "not YAML"), ("- {nope: 1}", "point 0 .*unknown parameter 'nope'"),
                                        ("- {trials: -1}", "point 0 .*'trials'")])
def test_a_bad_points_file_fails_before_anything_runs(tmp_path, text, match):
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(sweep.SweepError, match=match):
        sweep.plan("lopt", "smoke", points_file=f, out=tmp_path / "sw")
    assert not (tmp_path / "sw").exists()


@pytest.mark.parametrize("on,want", [("local", ("local", 1, "")), ("local[3]", ("local", 3, "")),
                                     ("dask://head:8786", ("dask", 1, "tcp://head:8786")), ("slurm", ("slurm", 1, ""))])
def test_executors_by_name(on, want):
    ex = sweep.parse_on(on)
    assert (ex.kind, ex.workers, ex.address) == want


@pytest.mark.parametrize("on", ["local[0]", "local[x]", "dask://head", "ray://x:1", ""])
def test_a_bad_executor_is_one_line(on, capsys):
    assert _main("sweep", "lopt", "--profile", "smoke", "--grid", "seed=0,1", "--on", on, "--dry-run") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("acl26: error: --on") and "\n" not in err


def test_dry_run_prints_each_point_and_its_folder_and_writes_nothing(tmp_path, capsys):
    assert _main("sweep", "lopt", "--profile", "smoke", "--grid", "seed=0,1", "-p", "trials=2", "--out",
                 str(tmp_path / "sw"), "--name", "try", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "2 points of lopt (smoke)" in out and out.count("[to run]") == 2 and "trials=2, seed=1" in out
    assert str(tmp_path / "sw" / "try" / "lopt") in out
    assert not (tmp_path / "sw").exists()


def test_the_slurm_job_script_holds_the_jobs_resources_and_the_thread_count():
    pytest.importorskip("dask_jobqueue", reason="the [cluster] extra (dask-jobqueue) is not installed")
    cluster = sweep.slurm_cluster(cores=8, memory="32GB", walltime="01:30:00", gpus=2, partition="gpu",
                                  account="lab", max_jobs=3, scale=False)
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    for line in ("#SBATCH -p gpu", "#SBATCH --cpus-per-task=8", "#SBATCH -t 01:30:00", "#SBATCH --gres=gpu:2",
                 "#SBATCH --account=lab", "export ACL26_THREADS=8", "export HF_HUB_OFFLINE=1"):
        assert line in script, line
    # one point at a time per job, on all its cores; the GPUs as the worker's resource
    assert "--nthreads 1" in script and "--resources GPU=2" in script
    with pytest.raises(sweep.SweepError, match="--slurm-cores"):
        sweep.slurm_cluster(cores=0, scale=False)


# ---- real points of the LoPT chapter (smoke profile, about 15 s each)


def real_points(test):
    """Marks a test that runs real LoPT smoke points (notebooks, the fetched assets, seconds each)."""
    return pytest.mark.slow(pytest.mark.notebook(pytest.mark.assets(test)))


SMOKE = ("sweep", "lopt", "--profile", "smoke", "--grid", "seed=0,1")


def _results(folder: Path) -> dict:
    """What a point decided: each claim's verdict and value, and the exactness table (timings left out)."""
    got = {}
    for point in sorted(p for p in (folder / "main" / "lopt").iterdir() if p.is_dir() and len(p.name) == 16):
        res = io.read_json(point / "results" / "lopt-smoke.json")
        run = io.read_json(point / "runs" / "lopt.json")
        got[run["params"]["seed"]] = ({c["id"]: (c["holds?"], c["value"]) for c in res["claims"]},
                                      res["metrics"]["exact_summary"])
    return got


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("local")
    t0 = time.perf_counter()
    code = _main(*SMOKE, "--on", "local[2]", "--out", str(out), "-q")
    return out, code, time.perf_counter() - t0


@real_points
def test_local_sweep_runs_each_point_into_its_own_folder_and_collects_them(local_sweep, capsys):
    out, code, wall = local_sweep
    assert code == 0
    folders = [p for p in (out / "main" / "lopt").iterdir() if p.is_dir() and len(p.name) == 16]
    assert len(folders) == 2
    for f in folders:
        run = io.read_json(f / "runs" / "lopt.json")
        assert run["key"].startswith(f.name) and (f / "lopt.ipynb").is_file()
    # the first point ran alone, on every core; the next one beside it would have, on half of them
    from acl26 import machine

    threads = sorted(int(log.read_text().split("# threads ")[1].split(",")[0])
                     for log in (out / "main" / "lopt" / "logs").glob("*.log"))
    assert threads == sorted([machine.cpu_count(), max(1, machine.cpu_count() // 2)])
    assert _main("sweep", "collect", str(out), "--metric", "value.paper_rule_any", "--by", "seed") == 0
    import pandas as pd

    table = pd.read_csv(out / "collected.csv")
    assert sorted(table["seed"]) == [0, 1] and set(table["status"]) == {"ok"} and set(table["sweep"]) == {"main"}
    assert {"verdict.exact", "value.exact", "trials", "wall_s"} <= set(table.columns)
    assert (table["verdict.exact"] == "yes").all()
    assert (out / "value.paper_rule_any-by-seed.png").stat().st_size > 1000
    pytest.importorskip("pyarrow")
    assert len(pd.read_parquet(out / "collected.parquet")) == 2


@real_points
def test_a_rerun_skips_finished_points(local_sweep, capsys):
    out, code, _ = local_sweep
    assert code == 0
    stamps = {p: p.stat().st_mtime_ns for p in (out / "main" / "lopt").rglob("*.ipynb")}
    assert _main(*SMOKE, "--on", "local[2]", "--out", str(out), "-q") == 0
    assert "0 run, 2 finished earlier, 0 failed" in capsys.readouterr().out
    assert stamps == {p: p.stat().st_mtime_ns for p in (out / "main" / "lopt").rglob("*.ipynb")}


@real_points
def test_a_failed_point_is_kept_apart_and_the_others_go_on(tmp_path, monkeypatch, capsys):
    """seed=1's process fails (as a crash in the notebook would); seed=0 still finishes. The re-run, with
    the cause gone, runs only the failed point and removes its failure record."""
    wrapper = tmp_path / "flaky_acl26.py"
    wrapper.write_text("import sys\nfrom acl26 import cli\n"
                       "if 'seed=1' in sys.argv:\n"
                       "    print('acl26: error: lopt (smoke) failed in cell 7: MemoryError: out of memory', file=sys.stderr)\n"
                       "    sys.exit(2)\n"
                       "cli.entry()\n")
    monkeypatch.setattr(sweep, "_acl26", lambda: [sys.executable, str(wrapper)])
    out = tmp_path / "sw"
    args = (*SMOKE, "-p", "trials=2", "--on", "local[2]", "--out", str(out), "-q")
    assert _main(*args) == 2
    cap = capsys.readouterr()
    assert "1 of 2 points failed" in cap.err and cap.err.count("\n") == 1
    failed = list((out / "main" / "lopt" / "failed").glob("*.json"))
    assert len(failed) == 1
    record = json.loads(failed[0].read_text())
    assert record["overrides"] == {"trials": 2, "seed": 1} and "MemoryError: out of memory" in record["error"]
    assert not (out / "main" / "lopt" / failed[0].stem).exists()  # the failed point's folder is not made
    done = [p for p in (out / "main" / "lopt").iterdir() if len(p.name) == 16]
    assert len(done) == 1 and (done[0] / "results" / "lopt-smoke.json").is_file()
    rows = sweep.collect_rows(out)
    assert sorted(r["status"] for r in rows) == ["failed", "ok"]
    monkeypatch.undo()
    assert _main(*args) == 0
    assert "1 run, 1 finished earlier, 0 failed" in capsys.readouterr().out
    assert not failed[0].exists()


@real_points
def test_a_dask_local_cluster_gives_the_same_results_as_local_2(local_sweep, tmp_path):
    distributed = pytest.importorskip("distributed", reason="the [cluster] extra (Dask distributed) is not installed")
    out_local, code, _ = local_sweep
    assert code == 0
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        host_port = cluster.scheduler_address.removeprefix("tcp://")
        out = tmp_path / "dask"
        assert _main(*SMOKE, "--on", f"dask://{host_port}", "--out", str(out), "-q") == 0
    assert _results(out) == _results(out_local)
    assert len(_results(out)) == 2
    # each of the 2 single-threaded workers on this host ran its point on its share of the cores
    logs = " ".join(p.read_text() for p in (out / "main" / "lopt" / "logs").glob("*.log"))
    from acl26 import machine

    assert f"# threads {max(1, machine.cpu_count() // 2)}," in logs
    assert _main("sweep", "collect", str(out)) == 0


def test_each_point_runs_in_the_folder_it_was_validated_in_and_logs_to_an_absolute_path(tmp_path, monkeypatch):
    """A relative path given as a parameter means the same folder to the point's process."""
    from concurrent.futures import Future

    seen = []

    class Recorder:
        def submit(self, commands, cwd, log, name, alone=False):
            seen.append((cwd, log, alone))
            f = Future()
            f.set_result({"rc": 0, "wall_s": 0.0, "host": "here"})
            return f

        as_completed = staticmethod(lambda futures: futures)

        def close(self):
            pass

    monkeypatch.chdir(tmp_path)
    plan = sweep.plan("lopt", "smoke", grid=["seed=0,1"], out="sw", root=ROOT)
    res = sweep.run_sweep(plan, executor=Recorder(), progress=False, say=lambda line: None)
    assert [o.status for o in res.outcomes] == ["ok", "ok"]
    assert all(cwd == str(tmp_path) and Path(log).is_absolute() for cwd, log, _ in seen)
    assert [alone for *_, alone in seen] == [True, False]  # the first point alone, then the rest


def test_points_files_read_exponents_as_numbers_and_name_themselves_when_unreadable(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("- {seed: 1, trials: 2}\n- {nothing: 1e-3}\n")
    assert sweep.read_points(f)[1] == {"nothing": 0.001}
    f.write_bytes(b"- {seed: \xff}\n")
    with pytest.raises(sweep.SweepError, match="--points .*not UTF-8"):
        sweep.read_points(f)


def test_collect_counts_a_point_that_finished_after_failing_once(tmp_path):
    point = tmp_path / "main" / "lopt" / ("a" * 16)
    io.write_json(point / "runs" / "lopt.json", {"paper": "lopt", "profile": "smoke", "key": "a" * 64,
                                                "params": {"seed": 0}, "wall_s": 1.0})
    io.write_json(point / "results" / "lopt-smoke.json", {"claims": [{"id": "exact", "holds?": "yes", "value": 1.0}],
                                                         "metrics": {"n": 3}})
    # the failure record of the earlier try, which could not be removed (no longer acl26's: copied)
    (tmp_path / "main" / "lopt" / "failed").mkdir()
    (tmp_path / "main" / "lopt" / "failed" / ("a" * 16 + ".json")).write_text(json.dumps(
        {"paper": "lopt", "profile": "smoke", "key": "a" * 64, "params": {"seed": 0}, "error": "x"}))
    rows = sweep.collect_rows(tmp_path)
    assert [(r["status"], r["verdict.exact"], r["metric.n"], r["sweep"]) for r in rows] == [("ok", "yes", 3, "main")]


def test_a_file_system_without_locks_warns_and_runs_the_block(tmp_path, monkeypatch, capsys):
    import errno
    import fcntl

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    ran = []
    with io.file_lock(tmp_path / "x.lock", what="training 'm'"):
        ran.append(1)
    assert ran == [1] and "takes no locks" in capsys.readouterr().err
