"""Nothing lost: every writer of the package against the three targets a careless user gives it.

Each writer (every caller of :func:`acl26.io.atomic_dir` / :func:`acl26.io.atomic_path`, and the
runner's and benchmarks' moves) is tried against

* a target that is, or is an ancestor of, one of its inputs: always refused, even with overwrite;
* a non-empty folder acl26 did not write: refused (untouched) unless overwrite;
* a file: refused (untouched) unless overwrite;

and must fail before its expensive work, with a one-line message naming the path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from acl26 import io, paths
from acl26.errors import RunError


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (or the file itself) with its bytes: what must survive a refusal."""
    if folder.is_file():
        return {".": folder.read_bytes()}
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _foreign_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "notes.txt").write_text("a user's notes")
    (path / "sub").mkdir()
    (path / "sub" / "model.safetensors").write_bytes(b"someone else's model")
    return path


def _foreign_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a user's file")
    return path


def _one_line(exc: BaseException, path: Path) -> None:
    msg = str(exc)
    assert "\n" not in msg and str(path) in msg, msg


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# ---- io itself


def test_atomic_dir_replaces_only_what_it_wrote(tmp_path):
    target = tmp_path / "out"
    with io.atomic_dir(target) as tmp:
        (tmp / "a.txt").write_text("1")
    with io.atomic_dir(target) as tmp:  # its own folder, unchanged: replaced
        (tmp / "b.txt").write_text("2")
    assert sorted(p.name for p in target.iterdir()) == [io.DIR_MARKER, "b.txt"]
    (target / "mine.txt").write_text("the user added this")
    with pytest.raises(io.OutputExistsError) as err:
        with io.atomic_dir(target) as tmp:
            (tmp / "c.txt").write_text("3")
    _one_line(err.value, target)
    assert (target / "mine.txt").read_text() == "the user added this"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], "no staging or .old folder left behind"


def test_atomic_dir_takes_an_empty_folder_and_leaves_no_old_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with io.atomic_dir(tmp_path / "empty") as tmp:
        (tmp / "x").write_text("x")
    file = _foreign_file(tmp_path / "file")
    with io.atomic_dir(file, overwrite=True) as tmp:
        (tmp / "x").write_text("x")
    assert file.is_dir() and sorted(p.name for p in tmp_path.iterdir()) == ["empty", "file"]


def test_atomic_path_replaces_only_unchanged_files_it_wrote(tmp_path):
    target = tmp_path / "r.json"
    io.write_json(target, {"a": 1})
    io.write_json(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    target.write_text('{"edited": true}')
    with pytest.raises(io.OutputExistsError, match="changed since"):
        io.write_json(target, {"a": 3})
    assert json.loads(target.read_text()) == {"edited": True}
    io.write_json(target, {"a": 3}, overwrite=True)
    assert json.loads(target.read_text()) == {"a": 3}
    (tmp_path / "d").mkdir()
    with pytest.raises(io.OutputExistsError, match="is a folder"):
        io.write_text(tmp_path / "d", "x", overwrite=True)


def test_a_symbolic_link_is_not_followed_or_replaced(tmp_path):
    real = _foreign_folder(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    before = _tree(real)
    with pytest.raises(io.OutputExistsError, match="symbolic link"):
        with io.atomic_dir(link):
            pass
    with io.atomic_dir(link, overwrite=True) as tmp:
        (tmp / "x").write_text("x")
    assert _tree(real) == before and link.is_dir() and not link.is_symlink()


def test_failure_and_interrupt_leave_the_target_untouched(tmp_path):
    target = tmp_path / "out"
    with io.atomic_dir(target) as tmp:
        (tmp / "v1").write_text("1")
    for exc in (RuntimeError("boom"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with io.atomic_dir(target) as tmp:
                (tmp / "v2").write_text("2")
                raise exc
        with pytest.raises(type(exc)):
            with io.atomic_path(tmp_path / "f.txt") as tmp:
                tmp.write_text("half")
                raise exc
    assert sorted(p.name for p in target.iterdir()) == [io.DIR_MARKER, "v1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_full_disk_leaves_nothing_half_written(tmp_path, monkeypatch):
    import errno

    target = tmp_path / "out.json"
    io.write_json(target, {"v": 1})
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        io.write_json(target, {"v": 2})
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert json.loads(target.read_text()) == {"v": 1}
    assert sorted(p.name for p in tmp_path.iterdir()) == [io.FILE_LEDGER, "out.json"]
    io.write_json(target, {"v": 3})  # still acl26's: the failed write did not disturb the ledger
    assert json.loads(target.read_text()) == {"v": 3}


def test_discard_removes_only_what_acl26_wrote(tmp_path):
    folder = tmp_path / "partial"
    io.write_text(folder / "last.pt", "checkpoint")
    io.discard(folder)
    assert not folder.exists()
    io.write_text(folder / "last.pt", "checkpoint")
    (folder / "keep.txt").write_text("the user's")
    io.discard(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]


# ---- model interpolation: interpolate_files (out_dir is the user's)


def _tiny_pair(root: Path) -> tuple[Path, Path]:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16,
                      tie_word_embeddings=False)
    out = []
    for seed, name in enumerate(("instruct", "thinking")):
        torch.manual_seed(seed)
        LlamaForCausalLM(cfg).save_pretrained(root / name)
        out.append(root / name)
    return out[0], out[1]


@pytest.mark.parametrize("case", ["ancestor", "input", "folder", "file"])
def test_interpolate_files_refuses_what_it_did_not_write(tmp_path, case):
    from acl26.papers.model_interpolation import merge as M

    a, b = _tiny_pair(tmp_path / "models")
    out = {"ancestor": tmp_path / "models", "input": b, "folder": _foreign_folder(tmp_path / "out"),
           "file": _foreign_file(tmp_path / "out.bin")}[case]
    everything = _tree(tmp_path)
    with pytest.raises(io.OutputExistsError) as err:
        M.interpolate_files(a, b, out, 0.5)
    _one_line(err.value, out)
    assert "out_dir" in str(err.value)
    assert _tree(tmp_path) == everything, "a refused merge must change nothing"
    if case in ("ancestor", "input"):
        with pytest.raises(ValueError, match="input"):
            M.interpolate_files(a, b, out, 0.5, overwrite=True)
        assert _tree(tmp_path) == everything
    else:
        M.interpolate_files(a, b, out, 0.5, overwrite=True)
        assert (out / "model.safetensors").is_file() and not (out / "notes.txt").exists()
        assert _tree(a) == {k[len("models/instruct/"):]: v for k, v in everything.items()
                            if k.startswith("models/instruct/")}


def test_interpolate_files_rewrites_its_own_merge(tmp_path):
    from acl26.papers.model_interpolation import merge as M

    a, b = _tiny_pair(tmp_path / "models")
    out = M.interpolate_files(a, b, tmp_path / "merged", 0.2)
    M.interpolate_files(a, b, out, 0.8)
    assert json.loads((out / "interpolation.json").read_text())["lambda"] == 0.8


# ---- the runner and the benchmarks (the output folder is the user's: --out)


@pytest.fixture()
def fake_repo(tmp_path, monkeypatch, cache):
    import nbformat

    import fakepaper
    from acl26 import registry

    root = tmp_path / "repo"
    (root / "notebooks").mkdir(parents=True)
    nbformat.write(nbformat.from_dict(fakepaper.notebook()), root / "notebooks" / "fake.ipynb")
    chapter = fakepaper.chapter()
    monkeypatch.setitem(registry.CHAPTERS, "fake", chapter)
    monkeypatch.setenv("PYTHONPATH", str(Path(fakepaper.__file__).parent))
    return root


@pytest.mark.notebook
def test_run_refuses_outputs_it_did_not_write_before_running(fake_repo, tmp_path):
    from acl26 import runner

    # the out folder is the notebooks folder: its output would replace the notebook it runs
    with pytest.raises(io.OutputExistsError, match="input"):
        runner.run("fake", "smoke", root=fake_repo, out_dir=fake_repo / "notebooks", progress=False, overwrite=True)
    out = tmp_path / "out"
    _foreign_file(out / "fake.ipynb")
    (out / "notes.txt").write_text("keep me")
    before = _tree(out)
    with pytest.raises(io.OutputExistsError) as err:
        runner.run("fake", "smoke", root=fake_repo, out_dir=out, progress=False)
    _one_line(err.value, out / "fake.ipynb")
    assert _tree(out) == before and not (tmp_path / "cache" / "failed").exists(), "refused before running"
    res = runner.run("fake", "smoke", root=fake_repo, out_dir=out, progress=False, overwrite=True)
    assert res.notebook.read_text() != "a user's file" and (out / "notes.txt").read_text() == "keep me"
    runner.run("fake", "smoke", root=fake_repo, out_dir=out, progress=False)  # its own outputs: replaced
    blocked = _foreign_file(tmp_path / "blocked")
    with pytest.raises((OSError, io.OutputExistsError)):
        runner.run("fake", "smoke", root=fake_repo, out_dir=blocked, progress=False)
    assert blocked.read_text() == "a user's file"


def test_failed_notebooks_never_replace_each_other(cache):
    from acl26 import runner

    kept = []
    for _ in range(3):
        nb = cache.parent / "x.ipynb"
        nb.write_text("{}")
        kept.append(runner._keep_failed(nb, "fake", "smoke"))
    assert len(set(kept)) == 3 and all(k.is_file() for k in kept)


def test_bench_refuses_a_file_it_did_not_write(tmp_path, monkeypatch, cache):
    import dataclasses

    import fakepaper
    from acl26 import bench, registry

    calls = []

    def benchmarks(quick):
        calls.append(quick)
        return {"title": "Fake", "goals": [], "rows": []}

    monkeypatch.setitem(registry.CHAPTERS, "fake", dataclasses.replace(fakepaper.chapter(), benchmarks=benchmarks))
    out = tmp_path / "bench"
    _foreign_file(out / "fake.json")
    with pytest.raises(io.OutputExistsError) as err:
        bench.run_benchmarks(["fake"], quick=True, out_dir=out)
    _one_line(err.value, out / "fake.json")
    assert calls == [], "refused before the benchmark ran"
    assert bench.run_benchmarks(["fake"], quick=True, out_dir=out, overwrite=True) == [out / "fake.json"]
    assert bench.run_benchmarks(["fake"], quick=True, out_dir=out) == [out / "fake.json"]  # its own file now
    with pytest.raises((OSError, io.OutputExistsError)):
        bench.run_benchmarks(["fake"], quick=True, out_dir=_foreign_file(tmp_path / "afile"))


# ---- the book's generated pages and vendored MathJax


def test_generate_writes_all_pages_or_none(tmp_path, cache):
    from acl26 import book

    generated = tmp_path / "generated"
    _foreign_file(generated / "claims.md")
    with pytest.raises(io.OutputExistsError) as err:
        book.generate(tmp_path / "executed", generated)
    _one_line(err.value, generated / "claims.md")
    assert sorted(p.name for p in generated.iterdir()) == ["claims.md"], "no page written when one is refused"
    written = book.generate(tmp_path / "executed", generated, overwrite=True)
    assert sorted(p.name for p in written) == sorted(book.generated_names())
    assert book.generate(tmp_path / "executed", generated) == written
    with pytest.raises(io.OutputExistsError, match="is a folder"):
        book.generate(tmp_path / "executed", _foreign_folder(tmp_path / "g2" / "claims.md").parent)


@pytest.mark.parametrize("case", ["ancestor", "folder", "file"])
def test_vendor_mathjax(tmp_path, monkeypatch, case):
    from acl26 import assets, book

    src_root = tmp_path / "assets" / "mathjax"
    (src_root / "package" / "es5").mkdir(parents=True)
    (src_root / "package" / "es5" / "tex-chtml.js").write_text("mathjax")
    monkeypatch.setattr(assets, "path", lambda name, **kw: src_root)
    static = {"ancestor": tmp_path / "assets", "folder": tmp_path / "static", "file": tmp_path / "static"}[case]
    if case == "folder":
        _foreign_folder(static / "mathjax")
    elif case == "file":
        _foreign_file(static / "mathjax")
    before = _tree(tmp_path)
    with pytest.raises(io.OutputExistsError):
        book.vendor_mathjax(static)
    assert _tree(tmp_path) == before
    if case == "ancestor":
        with pytest.raises(io.OutputExistsError, match="input"):
            book.vendor_mathjax(static, overwrite=True)
        assert _tree(tmp_path) == before
    else:
        book.vendor_mathjax(static, overwrite=True)
        assert (static / "mathjax" / "tex-chtml.js").read_text() == "mathjax"
        book.vendor_mathjax(static)  # its own copy: replaced


# ---- results written by a notebook (ACL26_OUT)


def test_ledger_save_refuses_a_users_file(tmp_path, monkeypatch):
    import fakepaper
    from acl26 import claims

    monkeypatch.setenv("ACL26_OUT", str(tmp_path / "o"))
    target = _foreign_file(tmp_path / "o" / "results" / "fake-smoke.json")
    ledger = claims.Ledger("fake", "smoke", fakepaper.CLAIMS, params={})
    ledger.record("positive", 3)
    with pytest.raises(io.OutputExistsError):
        ledger.save()
    assert target.read_text() == "a user's file"
    target.unlink()
    assert ledger.save() == target and ledger.save() == target


# ---- cache writers: a folder or file in the way is refused before the expensive work


def test_tokenizer_cache_refuses_a_foreign_folder_before_building(cache):
    from acl26 import tokenization

    built = []
    _foreign_folder(cache / "tokenizers" / "k")
    with pytest.raises(io.OutputExistsError):
        tokenization._cached("k", lambda: built.append(1))
    assert built == []
    _foreign_file(cache / "tokenizers" / "f")
    with pytest.raises(io.OutputExistsError):
        tokenization._cached("f", lambda: built.append(1))
    assert built == []


@pytest.mark.parametrize("case", ["folder", "file"])
def test_smollm2_conversion_refuses_a_foreign_target_before_converting(cache, monkeypatch, case):
    from acl26 import assets, models

    monkeypatch.setattr(assets, "path", lambda *a, **k: pytest.fail("converted before checking the target"))
    target = cache / "models" / models.SMOLLM2_DIR
    (_foreign_folder if case == "folder" else _foreign_file)(target)
    before = _tree(target)
    with pytest.raises(RunError):  # refused as not acl26's, or as a damaged cache entry: both name the path
        models.smollm2_folder()
    assert _tree(target) == before


@pytest.mark.parametrize("where", ["final", "checkpoint"])
def test_training_refuses_a_foreign_target_before_training(cache, where):
    from acl26 import models, training

    cfg = models.dense_config(32, hidden=16, layers=1, heads=2, kv_heads=1, intermediate=32, max_positions=16)
    tc = training.TrainConfig(steps=2, batch_size=2, eval_every=2, eval_blocks=2, checkpoint_every=1)
    blocks = torch.randint(0, 32, (8, 8))
    key = training.config_key(cfg, tc, "f")
    final, partial = training._folders("t", key)
    target = _foreign_folder(final) if where == "final" else _foreign_file(partial / "last.pt")
    before = _tree(target)
    steps = []
    with pytest.raises(io.OutputExistsError):
        training.train(cfg, tc, blocks, blocks, name="t", data_fingerprint="f", progress=False, use_cache=False,
                       on_step=lambda s, loss: steps.append(s))
    assert steps == [] and _tree(target) == before


def test_training_removes_only_its_own_checkpoint(cache):
    from acl26 import models, training

    cfg = models.dense_config(32, hidden=16, layers=1, heads=2, kv_heads=1, intermediate=32, max_positions=16)
    tc = training.TrainConfig(steps=2, batch_size=2, eval_every=2, eval_blocks=2, checkpoint_every=1)
    blocks = torch.randint(0, 32, (8, 8))
    part = training.train(cfg, tc, blocks, blocks, name="t", data_fingerprint="f", progress=False, stop_after=1)
    partial = part.folder
    (partial / "notes.txt").write_text("mine")
    done = training.train(cfg, tc, blocks, blocks, name="t", data_fingerprint="f", progress=False)
    assert done.resumed_from == 1 and sorted(p.name for p in partial.iterdir()) == ["notes.txt"]


def test_corpus_writers_refuse_a_foreign_folder_before_work(cache, monkeypatch):
    from tokenizers import Tokenizer, models as tk_models

    from acl26 import corpus

    docs = [corpus.Document("s", f"t{i}", "a b") for i in range(12)]
    monkeypatch.setattr(corpus, "_corpus_key", lambda config: "k")
    monkeypatch.setattr(corpus, "corpus_documents", lambda *a, **k: pytest.fail("worked before checking"))
    monkeypatch.setattr(corpus, "split_documents", lambda *a, **k: pytest.fail("worked before checking"))
    for folder in (cache / "corpus" / "k", cache / "tokenizers" / "bpe-k"):
        _foreign_folder(folder)
    tok = Tokenizer(tk_models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    with pytest.raises(io.OutputExistsError):
        corpus.load_corpus(tok, documents=docs, separator=None, progress=False)
    with pytest.raises(io.OutputExistsError):
        corpus.train_bpe(300, documents=docs, progress=False)
    assert (cache / "corpus" / "k" / "notes.txt").is_file() and (cache / "tokenizers" / "bpe-k" / "notes.txt").is_file()


def test_mta_writers_refuse_a_foreign_folder_before_work(cache, monkeypatch):
    from transformers import LlamaConfig, LlamaForCausalLM

    from acl26.papers.mta import data, distill

    cfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=16)
    teacher = LlamaForCausalLM(cfg)
    monkeypatch.setattr(data, "digest", lambda obj: "k" * 32)
    monkeypatch.setattr(data, "encoded_digest", lambda items: "i")
    _foreign_folder(cache / "mta" / f"teacher-{'k' * 16}")
    called = []
    monkeypatch.setattr(teacher, "forward", lambda *a, **k: called.append(1))
    items = [SimpleNamespace(ids=[1, 2, 3])]
    with pytest.raises(io.OutputExistsError):
        data.teacher_cache(teacher, items, [1], top_k=2, pad_id=0, progress=False)
    assert called == []
    monkeypatch.setattr(distill, "_key", lambda setup, cond, cfg: "d" * 12)
    _foreign_folder(cache / "models" / f"mta-x-{'d' * 12}")
    setup = SimpleNamespace(student=teacher)
    with pytest.raises(io.OutputExistsError):
        distill.distill(setup, distill.Condition(), distill.DistillConfig(steps=1, batch_size=1), name="x",
                        progress=False)
    assert called == []


def test_llamacpp_writers_refuse_before_work(tmp_path, monkeypatch, cache):
    from acl26.papers.sherry import llamacpp

    build_dir = _foreign_folder(tmp_path / "build")
    monkeypatch.setattr(llamacpp, "build_dir", lambda: build_dir)
    monkeypatch.setattr(llamacpp, "available", lambda: False)
    monkeypatch.setattr(llamacpp.subprocess, "run", lambda *a, **k: pytest.fail("built before checking"))
    with pytest.raises(io.OutputExistsError):
        llamacpp.build()
    assert (build_dir / "notes.txt").is_file()
    monkeypatch.setattr(llamacpp, "require", lambda: None)
    src = _foreign_file(tmp_path / "model.gguf")
    with pytest.raises(io.OutputExistsError, match="input"):  # quantizing a file onto itself
        llamacpp.quantize(src, src, "TQ2_0", head="f16")
    with pytest.raises(io.OutputExistsError):
        llamacpp.quantize(src, _foreign_file(tmp_path / "other.gguf"), "TQ2_0", head="f16")
    with pytest.raises(io.OutputExistsError):
        llamacpp.write_gguf("tiny", _foreign_file(tmp_path / "user.gguf"))
    assert src.read_text() == "a user's file"


def test_streamed_merge_scratch_in_the_cache(cache, tmp_path):
    from acl26.papers.model_interpolation import study

    a, b = _tiny_pair(tmp_path / "models")
    scratch = _foreign_folder(cache / "model_interpolation" / "streamed-merge")
    with pytest.raises(io.OutputExistsError):
        study.merged({"instruct_dir": a, "thinking_dir": b}, {"merge": "streamed", "dtype": "float32"}, 0.5)
    assert (scratch / "notes.txt").is_file()


def test_importing_the_package_creates_no_folder(tmp_path):
    import subprocess
    import sys

    env = {**os.environ, "ACL26_CACHE": str(tmp_path / "c"), "XDG_CACHE_HOME": str(tmp_path / "x")}
    env.pop("NUMBA_CACHE_DIR", None)
    code = ("import acl26, acl26.kernels, acl26.kernels.ternary, acl26.kernels.tokmerge, acl26.kernels.dp_alloc, "
            "acl26.registry, acl26.cli")
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "importing acl26 created a folder"
    assert paths.cache_root() != tmp_path / "c"  # (this process's env is untouched)


# ---- inputs are decided on the files themselves, not on their paths' spelling


def test_inputs_through_links_and_dotdot_are_protected(tmp_path):
    (tmp_path / "data" / "x" / "y").mkdir(parents=True)
    model = tmp_path / "data" / "x" / "m"
    model.mkdir()
    (model / "w.bin").write_text("weights")
    link = tmp_path / "lnk"
    link.symlink_to(tmp_path / "data" / "x" / "y")
    with pytest.raises(io.OutputExistsError, match="input"):  # lnk/../m is data/x/m, not tmp/m
        with io.atomic_dir(tmp_path / "data" / "x", overwrite=True, inputs=[link / ".." / "m" / "w.bin"]):
            pass
    alias = tmp_path / "alias"
    alias.symlink_to(model)
    with pytest.raises(io.OutputExistsError, match="input"):  # the input named through a link
        with io.atomic_dir(model, overwrite=True, inputs=[alias]):
            pass
    for bad in (model / "sub" / "..", Path(".")):
        with pytest.raises(io.OutputExistsError, match="not a name"):
            with io.atomic_dir(bad, overwrite=True):
                pass
    assert (model / "w.bin").read_text() == "weights"


def test_a_same_size_edit_makes_a_folder_the_users(tmp_path):
    with io.atomic_dir(tmp_path / "out") as tmp:
        (tmp / "w.bin").write_bytes(b"A" * 100)
    (tmp_path / "out" / "w.bin").write_bytes(b"U" * 100)  # fine-tuned in place: same size
    with pytest.raises(io.OutputExistsError):
        with io.atomic_dir(tmp_path / "out"):
            pass
    assert (tmp_path / "out" / "w.bin").read_bytes() == b"U" * 100


def test_a_shard_that_links_into_the_target_is_an_input(tmp_path):
    from acl26.papers.model_interpolation import merge as M

    a, b = _tiny_pair(tmp_path / "models")
    merged = M.interpolate_files(a, b, tmp_path / "merged", 0.5)
    (a / "model.safetensors").unlink()
    (a / "model.safetensors").symlink_to(merged / "model.safetensors")
    with pytest.raises(io.OutputExistsError, match="input"):
        M.interpolate_files(a, b, merged, 0.5, overwrite=True)
    assert (merged / "model.safetensors").is_file()


def test_bookkeeping_names_are_not_targets(tmp_path):
    with pytest.raises(io.OutputExistsError, match="bookkeeping"):
        io.write_text(tmp_path / io.FILE_LEDGER, '{"victim.txt": [1, 2, 3]}')


def test_files_get_the_users_umask_not_private_modes(tmp_path):
    old = os.umask(0o022)
    try:
        io.write_text(tmp_path / "f.txt", "x")
        with io.atomic_dir(tmp_path / "d"):
            pass
    finally:
        os.umask(old)
    assert (tmp_path / "f.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "d").stat().st_mode & 0o777 == 0o755


def test_kernels_import_with_the_jit_disabled(tmp_path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import acl26.kernels.ternary, acl26.kernels.tokmerge, "
                           "acl26.kernels.dp_alloc"], env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ---- the remaining writers: an asset's folder, the book's build record, a file where a cache folder goes


@pytest.mark.parametrize("case", ["folder", "file"])
def test_fetch_refuses_a_foreign_asset_folder(cache, monkeypatch, tmp_path, case):
    from test_assets import _entry, _fake_download

    from acl26 import assets

    fake = _fake_download(b"module.exports = 1;\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    fake(["npm"], probe)
    monkeypatch.setattr(assets.subprocess, "run", fake)
    manifest = assets.load_manifest(_entry(sha256=assets.sha256_file(probe / "is-number-7.0.0.tgz")))
    target = cache / "assets" / "tiny"
    (_foreign_folder if case == "folder" else _foreign_file)(target)  # no asset stamp: not acl26's
    before = _tree(target)
    with pytest.raises(io.OutputExistsError):
        assets.fetch(manifest=manifest, progress=False)
    assert _tree(target) == before
    assets.fetch(manifest=manifest, progress=False, force=True)  # --force: asked for
    assert (target / "package" / "index.js").is_file() and not (target / "notes.txt").exists()


def test_book_refuses_a_foreign_build_record_before_any_work(tmp_path, monkeypatch, capsys):
    from acl26 import assets, cli

    root = tmp_path / "repo"
    (root / "book" / "executed").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[project]\nname = "acl26-repro"\n')
    _foreign_file(root / "book" / "executed" / "build.json")
    monkeypatch.chdir(root)
    monkeypatch.setattr(assets, "fetch", lambda *a, **k: pytest.fail("worked before checking"))
    assert cli.main(["book", "--skip-run", "--skip-bench", "--skip-build"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "build.json" in err[0] and "--force" in err[0]
    assert (root / "book" / "executed" / "build.json").read_text() == "a user's file"


def test_cache_writers_refuse_a_file_where_their_folder_goes(cache, monkeypatch, tmp_path):
    from tokenizers import Tokenizer, models as tk_models
    from transformers import LlamaConfig, LlamaForCausalLM

    from acl26 import corpus
    from acl26.papers.model_interpolation import study
    from acl26.papers.mta import data
    from acl26.papers.sherry import llamacpp

    monkeypatch.setattr(corpus, "_corpus_key", lambda config: "k")
    docs = [corpus.Document("s", f"t{i}", "a b") for i in range(12)]
    tok = Tokenizer(tk_models.WordLevel({"a": 0, "b": 1}, unk_token="a"))
    files = [_foreign_file(cache / "corpus" / "k"), _foreign_file(cache / "tokenizers" / "bpe-k"),
             _foreign_file(cache / "mta" / f"teacher-{'k' * 16}"),
             _foreign_file(cache / "model_interpolation" / "streamed-merge"), _foreign_file(tmp_path / "build")]
    with pytest.raises(io.OutputExistsError):
        corpus.load_corpus(tok, documents=docs, separator=None, progress=False)
    with pytest.raises(io.OutputExistsError):
        corpus.train_bpe(300, documents=docs, progress=False)
    cfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, max_position_embeddings=16)
    monkeypatch.setattr(data, "digest", lambda obj: "k" * 32)
    monkeypatch.setattr(data, "encoded_digest", lambda items: "i")
    with pytest.raises(io.OutputExistsError):
        data.teacher_cache(LlamaForCausalLM(cfg), [SimpleNamespace(ids=[1, 2])], [1], top_k=2, pad_id=0, progress=False)
    a, b = _tiny_pair(tmp_path / "models")
    with pytest.raises(io.OutputExistsError):
        study.merged({"instruct_dir": a, "thinking_dir": b}, {"merge": "streamed", "dtype": "float32"}, 0.5)
    monkeypatch.setattr(llamacpp, "build_dir", lambda: tmp_path / "build")
    monkeypatch.setattr(llamacpp, "available", lambda: False)
    with pytest.raises(io.OutputExistsError):
        llamacpp.build()
    assert all(f.read_text() == "a user's file" for f in files)
