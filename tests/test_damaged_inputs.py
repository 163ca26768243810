"""Damaged inputs that ended in an internal error (or a line naming nothing) now end in one line naming
the file, layer or parameter, and the repair (issue 38).

* a damaged asset stamp (``$ACL26_CACHE/assets/<name>/asset.json``), read by :func:`acl26.assets.path`
  (the notebooks' lookup), ``acl26 fetch`` and ``acl26 fetch --verify``;
* ``interpolate_files`` on a safetensors index or header nested too deep for ``json`` (RecursionError);
* ``moefy``'s router fit on rank-deficient activations without a penalty (torch's LinAlgError), and on
  non-finite activations;
* ``acl26 sync`` on a notebook that is not UTF-8 JSON, not an object, or not a valid notebook.

Every test works in a private ``$ACL26_CACHE`` or ``tmp_path``, on made-up assets and tiny models.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from acl26 import assets, cli
from test_cache_faults import FILES, _tarball  # the same fake npm package

ROOT = Path(__file__).resolve().parents[1]


def _one_line(err: str) -> str:
    """The one line on stderr, besides `acl26 fetch`'s progress bar."""
    lines = [ln for ln in re.split(r"[\r\n]", err) if ln.strip() and not ln.startswith("assets:")]
    assert len(lines) == 1, err
    return lines[0]


def _run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- 1. a damaged asset stamp


class _Registry:
    """The registry client, faked: 'downloads' our tarball while ``online``, fails like npm otherwise."""

    def __init__(self, blob: bytes):
        self.blob, self.online, self.calls = blob, True, 0

    def __call__(self, cmd, cwd, **kwargs):
        self.calls += 1
        if not self.online:
            return subprocess.CompletedProcess(cmd, 1, "", "npm error network unreachable")
        (Path(cwd) / "tiny-1.0.0.tgz").write_bytes(self.blob)
        return subprocess.CompletedProcess(cmd, 0, "", "")


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    """A fetched fake npm asset ``tiny`` in a private cache; every caller sees this manifest."""
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    blob = _tarball(FILES)
    manifest = assets.load_manifest(f"""
[tiny]
registry = "npm"
package = "tiny"
version = "1.0.0"
kind = "npm"
file = "tiny-1.0.0.tgz"
sha256 = "{hashlib.sha256(blob).hexdigest()}"
license = "MIT"
paths = ["package/*"]
""")
    registry = _Registry(blob)
    monkeypatch.setattr(assets.subprocess, "run", registry)
    monkeypatch.setattr(assets, "load_manifest", lambda text=None: manifest)
    assets.fetch(manifest=manifest, progress=False)
    registry.calls = 0
    return manifest["tiny"], registry


def _with(**fields):
    """A stamp damage: the good stamp with ``fields`` replaced (None: the key removed)."""
    def damage(stamp: Path) -> None:
        info = json.loads(stamp.read_text())
        for k, v in fields.items():
            if v is None:
                info.pop(k, None)
            else:
                info[k] = v
        stamp.write_text(json.dumps(info))
    return damage


def _as_directory(stamp: Path) -> None:
    stamp.unlink()
    stamp.mkdir()
    (stamp / "x").write_text("a user's file")


GOOD_ENTRY = {"sha256": "0" * 64, "size": 1}
STAMP_DAMAGES = {
    "truncated JSON": lambda s: s.write_bytes(s.read_bytes()[:25]),
    "empty": lambda s: s.write_bytes(b""),
    "garbage bytes": lambda s: s.write_bytes(bytes(range(256)) * 4),
    "not UTF-8": lambda s: s.write_bytes(b'{"sha256": "\xff\xfe"}'),
    "a list": lambda s: s.write_text("[1, 2, 3]"),
    "a string": lambda s: s.write_text('"asset.json"'),
    "a number": lambda s: s.write_text("42"),
    "null": lambda s: s.write_text("null"),
    "no keys": lambda s: s.write_text("{}"),
    "nested too deep": lambda s: s.write_text("[" * 100_000 + "]" * 100_000),
    "a directory": _as_directory,
    "sha256 not a string": _with(sha256=5),
    "paths not a list": _with(paths="package/*"),
    "hashes a list": _with(hashes=["package/index.js"]),
    "hashes empty": _with(hashes={}),
    "hashes null": lambda s: s.write_text(json.dumps({**json.loads(s.read_text()), "hashes": None})),
    "hash entry a string": _with(hashes={"package/index.js": "abc"}),
    "size a string": _with(hashes={"package/index.js": {"sha256": "0" * 64, "size": "1000"}}),
    "size a bool": _with(hashes={"package/index.js": {"sha256": "0" * 64, "size": True}}),
    "sha256 of a file missing": _with(hashes={"package/index.js": {"size": 1000}}),
    "a file outside the folder": _with(hashes={"../../../etc/passwd": GOOD_ENTRY}),
    "an absolute file": _with(hashes={"/etc/passwd": GOOD_ENTRY}),
    "old stamp, files of ints": _with(hashes=None, files=[1, 2]),
    "old stamp, files a string": _with(hashes=None, files="package/index.js"),
    "old stamp, no files": _with(hashes=None, files=[]),
}


def _assert_names_stamp(line: str, stamp: Path) -> None:
    assert str(stamp) in line and "`acl26 fetch --force tiny`" in line, line


@pytest.mark.parametrize("damage", list(STAMP_DAMAGES), ids=list(STAMP_DAMAGES))
def test_damaged_asset_stamp_is_one_line_naming_it_and_the_repair(tiny, capsys, damage):
    asset, registry = tiny
    stamp = asset.dir / assets.STAMP
    STAMP_DAMAGES[damage](stamp)
    registry.online = False  # what it reports must not depend on the network
    # the notebooks' lookup: never fetched again behind the user's back, never an internal error
    assert not assets.is_cached(asset)
    for fetch_missing in (True, False):
        with pytest.raises(assets.AssetError) as info:
            assets.path("tiny", fetch_missing=fetch_missing)
        msg = str(info.value)
        assert "\n" not in msg
        _assert_names_stamp(msg, stamp)
    with pytest.raises(assets.AssetError):
        assets.find("tiny", "package/*")
    assert registry.calls == 0
    report = assets.verify(["tiny"])
    _assert_names_stamp(report["tiny"], stamp)
    # acl26 fetch --verify, with and without the name
    for argv in (["fetch", "--verify"], ["fetch", "--verify", "tiny"]):
        code, out, err = _run_cli(capsys, *argv)
        assert code == 2, err
        line = _one_line(err)
        assert line.startswith("acl26: error: ") and "internal error" not in line
        _assert_names_stamp(line, stamp)
        assert "tiny: FAILED" in out
    assert registry.calls == 0
    # acl26 fetch: it fetches a damaged asset again; where that fails, the line names the stamp too
    code, _, err = _run_cli(capsys, "fetch", "tiny")
    line = _one_line(err)
    assert code == 2 and "internal error" not in line
    _assert_names_stamp(line, stamp)
    # the repair the lines name works
    registry.online = True
    code, _, err = _run_cli(capsys, "fetch", "--force", "tiny")
    assert code == 0, err
    assert assets.verify(["tiny"]) == {"tiny": None}
    assert assets.path("tiny", fetch_missing=False) == asset.dir


def test_plain_fetch_repairs_a_damaged_stamp_file_when_the_registry_answers(tiny, capsys):
    asset, registry = tiny
    stamp = asset.dir / assets.STAMP
    stamp.write_text('{"hashes": ')
    code, _, err = _run_cli(capsys, "fetch", "tiny")
    assert code == 0, err
    assert registry.calls == 1 and assets.verify(["tiny"]) == {"tiny": None}


def test_a_directory_in_place_of_the_stamp_is_not_replaced_without_force(tiny, capsys):
    asset, registry = tiny
    stamp = asset.dir / assets.STAMP
    _as_directory(stamp)
    code, _, err = _run_cli(capsys, "fetch", "tiny")
    line = _one_line(err)
    assert code == 2
    _assert_names_stamp(line, stamp)
    assert (stamp / "x").read_text() == "a user's file"  # nothing of the user's is deleted without --force


def test_a_whole_stamp_of_another_version_is_still_fetched_again(tiny):
    asset, registry = tiny
    stamp = asset.dir / assets.STAMP
    _with(sha256="1" * 64)(stamp)  # a stamp written for another manifest entry: not damaged, just stale
    assert not assets.is_cached(asset)
    assert assets.path("tiny") == asset.dir and registry.calls == 1
    assert assets.verify(["tiny"]) == {"tiny": None}


# ---- 2. interpolate_files on untrusted safetensors files


def _st_model(folder: Path) -> Path:
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    save_file({"model.layers.0.mlp.up_proj.weight": torch.ones(2, 3), "model.norm.weight": torch.ones(3)},
              str(folder / "model.safetensors"))
    (folder / "config.json").write_text("{}")
    return folder


def _header_file(file: Path, header: bytes, data: bytes = b"") -> None:
    file.write_bytes(len(header).to_bytes(8, "little") + header + data)


DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("damage,victim,expect", [
    (lambda a: (a / "model.safetensors.index.json").write_bytes(DEEP), "model.safetensors.index.json",
     "nested too deep"),
    (lambda a: (a / "model.safetensors.index.json").write_bytes(b'{"weight_map": ' + DEEP + b"}"),
     "model.safetensors.index.json", "nested too deep"),
    (lambda a: _header_file(a / "model.safetensors", DEEP), "model.safetensors", "nested too deep"),
    (lambda a: _header_file(a / "model.safetensors", b'{"model.norm.weight": ' + DEEP + b"}"), "model.safetensors",
     "nested too deep"),
    (lambda a: _header_file(a / "model.safetensors", b'{"x": {"dtype": "F32", "shape": ' + b"[" * 900 + b"]" * 900
                            + b', "data_offsets": [0, 0]}}'), "model.safetensors", "its entry is not"),
    (lambda a: (a / "model.safetensors.index.json").write_text('"weight_map"'), "model.safetensors.index.json",
     "a JSON str"),
    (lambda a: (a / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.norm.weight": "../b/model.safetensors",
        "model.layers.0.mlp.up_proj.weight": "model.safetensors"}})), "model.safetensors.index.json",
     "not a file name in"),
    (lambda a: (a / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "model.norm.weight": str(a.parent / "b" / "model.safetensors"),
        "model.layers.0.mlp.up_proj.weight": "model.safetensors"}})), "model.safetensors.index.json",
     "not a file name in"),
    (lambda a: _header_file(a / "model.safetensors", json.dumps({
        "model.norm.weight": {"dtype": "F8", "shape": [3], "data_offsets": [0, 3]},
        "model.layers.0.mlp.up_proj.weight": {"dtype": "F32", "shape": [2, 3], "data_offsets": [3, 27]}}).encode(),
        b"\0" * 27), "model.safetensors", "unsupported safetensors dtype"),
    (lambda a: _header_file(a / "model.safetensors", b"{}"), "", "different keys"),
], ids=["index-deep", "index-weight-map-deep", "header-deep", "header-entry-deep", "header-entry-900-deep",
        "index-a-string", "index-names-a-file-outside", "index-names-an-absolute-file", "header-unknown-dtype",
        "header-no-tensors"])
def test_interpolate_files_names_the_damaged_file(tmp_path, damage, victim, expect):
    from acl26.papers.model_interpolation import merge as M

    a, b = _st_model(tmp_path / "a"), _st_model(tmp_path / "b")
    damage(a)
    with pytest.raises(ValueError) as info:
        M.interpolate_files(a, b, tmp_path / "out", 0.5)
    msg = str(info.value)
    assert "\n" not in msg and len(msg) < 600 and str(a / victim) in msg and expect in msg, msg
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("which", ["model.safetensors.index.json", "model.safetensors"])
def test_interpolate_files_bounds_what_it_reads(tmp_path, monkeypatch, which):
    from acl26.papers.model_interpolation import merge as M

    a, b = _st_model(tmp_path / "a"), _st_model(tmp_path / "b")
    if which.endswith(".json"):
        (a / which).write_text(json.dumps({"weight_map": {"model.norm.weight": "model.safetensors",
                                                          "model.layers.0.mlp.up_proj.weight": "model.safetensors"}}))
    monkeypatch.setattr(M, "MAX_JSON_BYTES", 40)
    with pytest.raises(ValueError) as info:
        M.interpolate_files(a, b, tmp_path / "out", 0.5)
    msg = str(info.value)
    assert "\n" not in msg and str(a / which) in msg and "40" in msg, msg


# ---- 3. moefy's router fit


def _tiny_llama(seed=0, width=64, hidden=32):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=97, hidden_size=hidden, intermediate_size=width, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).eval()


def _calib(n=4, t=24, seed=1):
    return torch.randint(0, 97, (n, t), generator=torch.Generator().manual_seed(seed))


def _routers(moe) -> list[torch.Tensor]:
    return [t for layer in moe.model.layers for t in (layer.mlp.gate.weight, layer.mlp.gate.bias)]


@pytest.mark.parametrize("case", ["one token", "fewer tokens than the hidden size", "a constant hidden channel"])
def test_moefy_without_ridge_on_rank_deficient_activations(case):
    from acl26.papers.alloc_moe import moefy

    model = _tiny_llama()
    calib = _calib()
    if case == "one token":
        calib = calib[:1, :1]
    elif case == "fewer tokens than the hidden size":
        calib = calib[:1, :8]
    else:  # an RMSNorm weight of 0: that channel of every MLP input is 0 on every token
        for layer in model.model.layers:
            layer.post_attention_layernorm.weight.data[:4] = 0
    moe = moefy(model, 8, calib, top_k=8, ridge=0.0)  # was torch's LinAlgError (singular)
    assert all(bool(torch.isfinite(t).all()) for t in _routers(moe))
    ids = _calib(1, 12, seed=7)
    with torch.no_grad():
        assert torch.allclose(moe(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)


def test_ridge_zero_is_the_minimum_norm_least_squares_fit():
    from acl26.papers.alloc_moe.moefy import _ridge

    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 10, generator=g, dtype=torch.float64)  # 6 tokens, 10 dimensions: rank 5 once centred
    y = torch.randn(6, 3, generator=g, dtype=torch.float64)
    w, b = _ridge(x, y, 0.0)
    xc, yc = x - x.mean(0), y - y.mean(0)
    want = (torch.linalg.pinv(xc) @ yc).T
    assert torch.allclose(w, want, atol=1e-9) and torch.allclose(x @ w.T + b, y, atol=1e-9)
    w_small, _ = _ridge(x, y, 1e-9)  # the penalty's limit at 0
    assert torch.allclose(w_small, want, atol=1e-6)


@pytest.mark.parametrize("where,layer", [("embed", 0), ("gate1", 1), ("up0", 0)])
def test_moefy_refuses_non_finite_activations_naming_the_layer(where, layer):
    from acl26.papers.alloc_moe import moefy

    model = _tiny_llama()
    if where == "embed":
        model.model.embed_tokens.weight.data[:] = float("nan")
    elif where == "gate1":
        model.model.layers[1].mlp.gate_proj.weight.data[0, 0] = float("nan")
    else:
        model.model.layers[0].mlp.up_proj.weight.data[:] = float("inf")
    with pytest.raises(ValueError) as info:
        moefy(model, 8, _calib(), top_k=2)
    msg = str(info.value)
    assert "\n" not in msg and f"layer {layer}" in msg and "NaN or inf" in msg, msg
    assert not any(type(block.mlp).__name__ == "MoEfiedMLP" for block in model.model.layers)  # left unchanged


def test_moefy_refuses_a_ridge_that_overflows():
    from acl26.papers.alloc_moe import moefy

    with pytest.raises(ValueError, match=r"^ridge: "):
        moefy(_tiny_llama(), 8, _calib(), top_k=2, ridge=1e308)


# ---- 4. acl26 sync on a notebook that is not one


@pytest.fixture()
def checkout(tmp_path, monkeypatch):
    """A copy of the checkout's notebooks and book pages, with a pyproject naming acl26-repro; the cwd."""
    root = tmp_path / "repo"
    for sub in ("notebooks", "book"):
        shutil.copytree(ROOT / sub, root / sub, ignore=shutil.ignore_patterns("executed", "_generated", "_static"))
    (root / "pyproject.toml").write_text('[project]\nname = "acl26-repro"\n')
    monkeypatch.chdir(root)
    return root


def _notebook_with(**fields):
    def damage(path: Path) -> None:
        nb = json.loads(path.read_text(encoding="utf-8"))
        nb.update(fields)
        path.write_text(json.dumps(nb))
    return damage


def _cells(fn):
    def damage(path: Path) -> None:
        nb = json.loads(path.read_text(encoding="utf-8"))
        nb["cells"] = [fn(c) for c in nb["cells"]]
        path.write_text(json.dumps(nb))
    return damage


NOTEBOOK_DAMAGES = {
    "not JSON": lambda p: p.write_text("{not json"),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "not UTF-8": lambda p: p.write_bytes(b'{"cells": "\xff\xfe"}'),
    "a list": lambda p: p.write_text("[1, 2]"),
    "a string": lambda p: p.write_text('"notebook"'),
    "a number": lambda p: p.write_text("4"),
    "nested too deep": lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
    "no keys": lambda p: p.write_text("{}"),
    "cells a string": _notebook_with(cells="x"),
    "cells of numbers": _notebook_with(cells=[1, 2]),
    "nbformat 99": _notebook_with(nbformat=99),
    "nbformat a string": _notebook_with(nbformat="4"),
    "a cell without source": _cells(lambda c: {k: v for k, v in c.items() if k != "source"}),
    "cell_type a number": _cells(lambda c: {**c, "cell_type": 5}),
    "metadata a list": _cells(lambda c: {**c, "metadata": []}),
    "tags a number": _cells(lambda c: {**c, "metadata": {"tags": 5}}),
}


@pytest.mark.parametrize("damage", list(NOTEBOOK_DAMAGES), ids=list(NOTEBOOK_DAMAGES))
def test_sync_names_a_notebook_that_is_not_one(checkout, capsys, damage):
    from acl26 import sync

    victim = checkout / "notebooks" / "lopt.ipynb"
    NOTEBOOK_DAMAGES[damage](victim)
    before = {p: p.read_bytes() for p in sorted(checkout.rglob("*")) if p.is_file()}
    for check in (True, False):
        with pytest.raises(sync.SyncError) as info:
            sync.sync(checkout, check=check)
        msg = str(info.value)
        assert "\n" not in msg and str(victim) in msg, msg
    for argv in (["sync", "--check"], ["sync"]):
        code, _, err = _run_cli(capsys, *argv)
        line = _one_line(err)
        assert code == 2 and line.startswith("acl26: error: ") and "internal error" not in line
        assert str(victim) in line, line
    after = {p: p.read_bytes() for p in sorted(checkout.rglob("*")) if p.is_file()}
    assert after == before  # nothing was written


def test_sync_rewrites_a_toc_that_is_not_utf8(checkout, capsys):
    from acl26 import sync

    toc = checkout / "book" / "_toc.yml"
    toc.write_bytes(b"\xff\xfe not yaml")
    code, _, err = _run_cli(capsys, "sync", "--check")
    assert code == 2 and "stale" in _one_line(err) and str(toc) in err
    assert sync.sync(checkout) == [toc]
    assert toc.read_text(encoding="utf-8") == sync.toc_text()
