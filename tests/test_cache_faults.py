"""Trust, but verify, the cache (issue 25.5): per-file hashes of assets, `acl26 fetch --verify`, and one-line
errors naming the file and the repair for damaged assets, cache entries, checkpoints and packed matrices.

Every test works in a private ``$ACL26_CACHE`` (never the real one) on made-up assets and tiny models.
"""

from __future__ import annotations

import io as _io
import json
import subprocess
import tarfile

import numpy as np
import pytest
import torch

from acl26 import assets, cli, errors, tokenization

FILES = {"package/index.js": b"module.exports = 1;\n" * 50, "package/tokenizer.json": b"{}"}


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _tarball(files: dict[str, bytes]) -> bytes:
    buf = _io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, content in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(content)
            info.mtime = 0
            tf.addfile(info, _io.BytesIO(content))
    return buf.getvalue()


@pytest.fixture()
def tiny(cache, monkeypatch):
    """Fetched fake npm assets ``tiny`` and ``tiny2`` (two files each); every caller sees this manifest."""
    blob = _tarball(FILES)

    def fake_run(cmd, cwd, **kwargs):  # the registry client, 'downloading' our tarball
        (cwd / "tiny-1.0.0.tgz").write_bytes(blob)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    import hashlib

    manifest = assets.load_manifest("".join(f"""
[{name}]
registry = "npm"
package = "tiny"
version = "1.0.0"
kind = "npm"
file = "tiny-1.0.0.tgz"
sha256 = "{hashlib.sha256(blob).hexdigest()}"
license = "MIT"
paths = ["package/*"]
""" for name in ("tiny", "tiny2")))
    monkeypatch.setattr(assets.subprocess, "run", fake_run)
    monkeypatch.setattr(assets, "load_manifest", lambda text=None: manifest)
    assets.fetch(manifest=manifest, progress=False)
    return manifest["tiny"]


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# ---- assets: the manifest of hashes, the fast check on load, --verify


def test_fetch_records_sha256_and_size_of_every_file(tiny):
    stamp = json.loads((tiny.dir / assets.STAMP).read_text())
    assert set(stamp["hashes"]) == set(FILES)
    for name, content in FILES.items():
        assert stamp["hashes"][name]["size"] == len(content)
        assert stamp["hashes"][name]["sha256"] == assets.sha256_file(tiny.dir / name)


def test_truncated_asset_file_is_reported_on_load_with_the_repair(tiny):
    victim = tiny.dir / "package" / "index.js"
    victim.write_bytes(victim.read_bytes()[:10])
    assert not assets.is_cached(tiny)
    for fetch_missing in (True, False):  # never fetched again behind the user's back
        with pytest.raises(assets.AssetError) as info:
            assets.path("tiny", fetch_missing=fetch_missing)
        msg = str(info.value)
        assert "\n" not in msg and str(victim) in msg and "`acl26 fetch --force tiny`" in msg and "truncated" in msg
    assert victim.stat().st_size == 10


def test_fetch_force_repairs_a_damaged_asset(tiny):
    victim = tiny.dir / "package" / "index.js"
    victim.write_bytes(b"")
    assets.fetch(["tiny"], force=True, progress=False)
    assert victim.read_bytes() == FILES["package/index.js"]
    assert assets.verify(["tiny"]) == {"tiny": None}


def test_fetch_verify_through_the_cli(tiny, capsys):
    code, out, err = run_cli(capsys, "fetch", "--verify")
    assert code == 0 and out.splitlines() == ["tiny: verified", "tiny2: verified"] and not err
    victim = tiny.dir / "package" / "index.js"
    data = bytearray(victim.read_bytes())
    data[0] ^= 1  # same size: only the hash sees it
    victim.write_bytes(bytes(data))
    assert assets.is_cached(tiny)  # the fast path checks sizes only
    for argv in (["fetch", "--verify"], ["fetch", "--verify", "tiny"]):
        code, out, err = run_cli(capsys, *argv)
        line = one_line(err)
        assert code == 2 and line.startswith("acl26: error: ")
        assert str(victim) in line and "sha256" in line and "`acl26 fetch --force tiny`" in line
        assert f"tiny: FAILED: asset 'tiny' is corrupt: {victim}" in out


def test_fetch_verify_with_several_bad_assets(tiny, capsys):
    victims = [tiny.dir / "package" / "index.js", tiny.dir.with_name("tiny2") / "package" / "tokenizer.json"]
    for v in victims:
        v.write_bytes(b"")
    code, out, err = run_cli(capsys, "fetch", "--verify")
    line = one_line(err)  # one error line; stdout has one line per bad asset, naming its file
    assert code == 2 and "2 assets failed verification" in line and "`acl26 fetch --force tiny tiny2`" in line
    lines = out.splitlines()
    assert len(lines) == 2 and all("FAILED" in ln and str(v) in ln for ln, v in zip(lines, victims))


def test_fetch_verify_reports_a_truncated_file_and_refuses_force(tiny, capsys):
    victim = tiny.dir / "package" / "tokenizer.json"
    victim.write_bytes(b"{")
    code, _, err = run_cli(capsys, "fetch", "--verify", "tiny")
    line = one_line(err)
    assert code == 2 and str(victim) in line and "1 bytes" in line and "`acl26 fetch --force tiny`" in line
    code, _, err = run_cli(capsys, "fetch", "--verify", "--force", "tiny")
    assert code == 2 and "fetches nothing" in one_line(err)


def test_an_asset_cached_without_hashes_loads_but_does_not_verify(tiny, capsys):
    stamp = tiny.dir / assets.STAMP
    old = json.loads(stamp.read_text())
    del old["hashes"]  # what an older acl26 wrote
    stamp.write_text(json.dumps(old))
    assert assets.is_cached(tiny) and assets.path("tiny") == tiny.dir
    code, _, err = run_cli(capsys, "fetch", "--verify", "tiny")
    line = one_line(err)
    assert code == 2 and "older acl26 without file hashes" in line and "`acl26 fetch --force tiny`" in line
    (tiny.dir / "package" / "index.js").unlink()  # even then a missing file is seen on load
    with pytest.raises(assets.AssetError, match="index.js is missing.*acl26 fetch --force tiny"):
        assets.path("tiny")


def test_verify_of_an_asset_not_cached(cache, capsys):
    code, _, err = run_cli(capsys, "fetch", "--verify", "tok-gpt2")
    assert code == 2 and "not in the cache" in one_line(err) and "acl26 fetch tok-gpt2" in err
    code, out, err = run_cli(capsys, "fetch", "--verify")  # nothing cached, nothing named: nothing wrong
    assert code == 0 and "no asset is cached" in out


# ---- tokenizers: an asset's file, and the converted tokenizers cached under $ACL26_CACHE/tokenizers


def test_garbage_in_the_tokenizer_cache_names_the_file_and_the_repair(cache):
    entry = cache / "tokenizers" / "smollm2"
    entry.mkdir(parents=True)
    (entry / "tokenizer.json").write_text("garbage{{{")

    def build():
        raise AssertionError("a corrupt cache entry must be reported, not silently rebuilt")

    with pytest.raises(errors.CacheError) as info:
        tokenization._cached("smollm2", build)
    msg = str(info.value)
    assert "\n" not in msg and str(entry / "tokenizer.json") in msg and f"rm -r {entry}" in msg
    assert (entry / "tokenizer.json").read_text() == "garbage{{{"  # reported, not deleted


def test_garbage_tokenizer_in_an_asset_names_the_file_and_fetch_force(tiny):
    (tiny.dir / "package" / "tokenizer.json").write_text("[]")  # the same size as the real "{}"
    with pytest.raises(assets.AssetError) as info:
        tokenization._from_dir("tiny", "package")
    msg = str(info.value)
    assert "\n" not in msg and str(tiny.dir / "package" / "tokenizer.json") in msg
    assert "`acl26 fetch --force tiny`" in msg


def test_cache_errors_are_one_line_errors_of_the_cli():
    from acl26.runner import RunError

    assert issubclass(errors.CacheError, RunError)  # what acl26.cli.main prints as one line, exit 2


# ---- model folders: a local checkpoint, the trained-model cache, the corpus cache


def _tiny_model(folder):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder


def _truncate(file, keep=0.5):
    data = file.read_bytes()
    file.write_bytes(data[: int(len(data) * keep)])


def test_truncated_weights_of_a_local_model_folder(tmp_path):
    from acl26 import models

    folder = _tiny_model(tmp_path / "m")
    _truncate(folder / "model.safetensors")
    with pytest.raises(errors.RunError) as info:
        models.load_local(folder)
    assert "\n" not in str(info.value) and str(folder) in str(info.value)


def test_corrupt_dequantised_smollm2_folder_is_a_cache_error(cache):
    from acl26 import models

    folder = _tiny_model(cache / "models" / models.SMOLLM2_DIR)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(errors.CacheError, match=f"corrupt dequantised SmolLM2 folder {folder}.*rm -r {folder}"):
        models.smollm2()
    (folder / "config.json").unlink()  # half deleted: reported, never converted over
    with pytest.raises(errors.CacheError, match="no config.json"):
        models.smollm2_folder()


def test_corrupt_trained_model_in_the_cache(cache):
    from acl26 import models, training

    def cfg():  # a fresh config per call: save_pretrained adds `architectures` to the one it saves
        return models.dense_config(64, hidden=16, layers=1, heads=2, kv_heads=1, intermediate=32, max_positions=32)

    data = torch.randint(0, 64, (24, 16), generator=torch.Generator().manual_seed(0))
    tc = training.TrainConfig(steps=2, batch_size=4, eval_every=2, eval_blocks=2, checkpoint_every=2)
    res = training.train(cfg(), tc, data[:16], data[16:], name="tiny", data_fingerprint="x", progress=False)
    _truncate(res.folder / "model.safetensors")
    with pytest.raises(errors.CacheError) as info:
        training.train(cfg(), tc, data[:16], data[16:], name="tiny", data_fingerprint="x", progress=False)
    msg = str(info.value)
    assert "\n" not in msg and str(res.folder) in msg and f"rm -r {res.folder}" in msg


def test_truncated_corpus_cache_entry(cache):
    from tokenizers import Tokenizer, models as tmodels, pre_tokenizers

    from acl26 import corpus as D
    from acl26.texts import Document

    tk = Tokenizer(tmodels.WordLevel({w: i for i, w in enumerate(["[UNK]", "a", "b", "c"])}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    docs = [Document("s", f"d{i}", " ".join("abc"[(i + j) % 3] for j in range(20))) for i in range(10)]
    c = D.load_corpus(tk, documents=docs, separator=None)
    victim = c.path / "ids-train.npy"
    _truncate(victim, 0.9)
    with pytest.raises(errors.CacheError) as info:
        D.load_corpus(tk, documents=docs, separator=None)
    msg = str(info.value)
    assert "\n" not in msg and str(victim) in msg and f"rm -r {c.path}" in msg


# ---- model interpolation: damaged safetensors inputs


@pytest.fixture()
def pair(tmp_path):
    a = _tiny_model(tmp_path / "a")
    b = _tiny_model(tmp_path / "b")
    return a, b


def _merge_error(a, b, out):
    from acl26.papers.model_interpolation import merge as M

    with pytest.raises(ValueError) as info:
        M.interpolate_files(a, b, out, 0.5)
    assert not out.exists()
    msg = str(info.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("damage,expect", [
    (lambda f: f.write_bytes(f.read_bytes()[:5]), "fewer than the 8"),
    (lambda f: f.write_bytes((10**12).to_bytes(8, "little") + f.read_bytes()[8:]), "header in a file of"),
    (lambda f: f.write_bytes(f.read_bytes()[:8] + b"\xff" * 40 + f.read_bytes()[48:]), "not JSON"),
    (lambda f: _truncate(f, 0.5), "outside the"),
])
def test_corrupt_safetensors_header_names_the_file(pair, tmp_path, damage, expect):
    a, b = pair
    damage(b / "model.safetensors")
    msg = _merge_error(a, b, tmp_path / "out")
    assert str(b / "model.safetensors") in msg and "corrupt safetensors header" in msg and expect in msg


@pytest.mark.parametrize("index,expect", [
    ("{not json", "not a valid safetensors index"),
    ('{"metadata": {}}', "not a valid safetensors index"),
    ('{"weight_map": {"model.embed_tokens.weight": "model-00009.safetensors"}}', "model-00009.safetensors"),
])
def test_corrupt_safetensors_index_names_the_file(pair, tmp_path, index, expect):
    a, b = pair
    (a / "model.safetensors.index.json").write_text(index)
    msg = _merge_error(a, b, tmp_path / "out")
    assert str(a / "model.safetensors.index.json") in msg and expect in msg


# ---- Packed: the shape must fit the streams


def test_packed_refuses_a_shape_that_does_not_fit_its_streams():
    from acl26.kernels import ternary as tn

    T = np.tile(np.array([[0, -1, 1, -1], [1, 0, -1, 1]], np.int8), (5, 2))  # 10 rows, 8 columns
    packed = tn.pack_sherry(T)
    assert np.array_equal(tn.unpack_sherry(packed), T)
    bad = [
        (dict(shape=(20, 8)), "packed.codes must be uint8 of shape (2, 16)"),  # a block that was never packed
        (dict(shape=(8, 8)), "claims fewer rows"),
        (dict(shape=(10, 4)), "claims fewer columns"),  # the same bytes: the second group is in the high nibbles
        (dict(shape=(10, 6)), "multiple of 4"),
        (dict(shape=(10.0, 8)), "integer"),
        (dict(codes=packed.codes.astype(np.int8)), "uint8"),
        (dict(signs=packed.signs[:, :2]), "packed.signs"),
        (dict(fmt="tl3"), "fmt must be one of"),
    ]
    for change, match in bad:
        with pytest.raises(ValueError, match=match.replace("(", r"\(").replace(")", r"\)")) as info:
            packed._replace(**change)
        assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="claims fewer rows"):
        tn.Packed("sherry", (8, 8), packed.codes, packed.signs)
    # TL2 and I2: a shape that drops columns of the last group, or the odd last group, with the same stream sizes
    for fmt, cols, claim in (("tl2", 5, 4), ("i2", 4, 3), ("i2", 7, 6)):
        Tc = np.array([[1, -1, 0, 1, -1, 1, -1]] * 3, np.int8)[:, :cols]
        p = getattr(tn, f"pack_{fmt}")(Tc)
        assert np.array_equal(getattr(tn, f"unpack_{fmt}")(p), Tc)
        with pytest.raises(ValueError, match="fewer columns"):
            p._replace(shape=(3, claim))


# ---- the chapters' own caches: the MTA teacher cache, cached JSON records


def _teacher_cache(folder, n=2, t=3, k=2, layers=(1,), d=4):
    import numpy as np

    from acl26 import io as io_

    folder.mkdir(parents=True)
    np.save(folder / "topk_idx.npy", np.zeros((n, t, k), np.int32))
    np.save(folder / "topk_logp.npy", np.zeros((n, t, k), np.float32))
    np.save(folder / "hidden.npy", np.zeros((n, t, len(layers), d), np.float16))
    io_.write_json(folder / "meta.json", {"key": "x", "teacher_layers": list(layers), "top_k": k, "n": n,
                                         "max_len": t, "hidden_size": d})
    return folder


@pytest.mark.parametrize("damage", ["truncated", "wrong-shape", "meta-garbage", "missing"])
def test_damaged_mta_teacher_cache_is_named(tmp_path, damage):
    import numpy as np

    from acl26.errors import CacheError
    from acl26.papers.mta import data

    folder = _teacher_cache(tmp_path / "teacher-x")
    data.TeacherCache(folder)  # intact: loads
    victim = folder / "hidden.npy"
    if damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:-10])
    elif damage == "wrong-shape":
        np.save(victim, np.zeros((1, 3, 1, 4), np.float16))
    elif damage == "meta-garbage":
        victim = folder / "meta.json"
        victim.write_text("{garbage")
    else:
        victim.unlink()
    with pytest.raises(CacheError) as err:
        data.TeacherCache(folder)
    msg = str(err.value)
    assert "\n" not in msg and str(victim) in msg and f"rm -r {folder}" in msg


def test_damaged_cached_json_record_is_named(tmp_path):
    from acl26 import io as io_
    from acl26.errors import CacheError

    rec = tmp_path / "rec.json"
    for text in ("{not json", "[1, 2]"):
        rec.write_text(text)
        with pytest.raises(CacheError, match="rec.json"):
            io_.read_cached_json(rec, "cached rollout record")
