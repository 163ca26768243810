"""Weight interpolation between an Instruct and a Thinking checkpoint, and the merging baselines.

* :func:`interpolate` -- Θ(λ) = Θ_Instruct + λ·(Θ_Thinking − Θ_Instruct) on two state dicts, as the
  authors' ``mi.py`` does for every tensor, embeddings and norms included. λ = 0 returns Instruct's
  tensors bit for bit and λ = 1 Thinking's; in between it is ``torch.lerp`` (one fused kernel with
  no temporaries; bf16 and fp16 are computed in float32 and rounded once), so each tensor keeps
  its dtype.

  ``layers`` and ``modules`` restrict the interpolation to the tensors of those decoder layers
  and/or those sub-modules (``"attn"``: the attention projections; ``"mlp"``: the feed-forward
  block). Everything outside the selection -- embeddings, the final norm, the head, the layer
  norms of the layers, and the other sub-modules -- stays Instruct's, unchanged. The paper's
  full merge (no restriction) interpolates every tensor.

  ``skip`` and ``skip_layers`` are the paper's ablations (§5.3, Fig. 5, Table 3: "we either skip all
  the MHA or FFN sublayers"; Table 3's [0, 35] row equals the full MI-0.8): the named sub-modules
  (``skip``) or decoder layers (``skip_layers``) stay Instruct's, and *every other tensor* --
  embeddings, every norm, the head, the other sub-module -- is interpolated. With ``layers`` /
  ``modules`` too, a tensor is interpolated when the restriction selects it and no skip names it.
* :func:`interpolate_files` -- the same over two safetensors checkpoints on disk, one tensor at a
  time, writing shards of at most ``shard_bytes``; config and tokenizer are copied from the
  Thinking model (as ``mi.py`` does). Memory stays near one model.
* :func:`similarity` -- σ = Σ|A−B| / (Σ|A| + Σ|B|), per tensor and averaged over tensors (the
  paper's figure) or pooled over all tensors.
* :func:`endpoint_error` -- how far Θ(0) and Θ(1) lie from the two ends (0: exactly them).
* :func:`task_arithmetic` and :func:`ties` -- the paper's baselines relative to a shared base,
  through mergekit's ``merge_state_dicts`` (mergekit 0.1.5, the maintained implementation).
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import torch

from acl26 import checks, io

#: "attn": the attention block (its projections, and any norm inside it such as Qwen3's q_norm / k_norm);
#: "mlp": the feed-forward block (dense or MoE)
MODULES = ("attn", "mlp")
#: ``<prefix>.layers.<i>.`` (LLaMA, Qwen, Mistral, ...), ``.h.<i>.`` (GPT-2), ``.blocks.<i>.``
_LAYER = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")
_ATTN = re.compile(r"\.(?:self_attn|attn|attention|self_attention)\.")
_MLP = re.compile(r"\.(?:mlp|feed_forward|ffn|block_sparse_moe)\.")
#: the largest safetensors header, and index file, read: the limit of safetensors itself (100 MB)
MAX_JSON_BYTES = 100_000_000


def layer_of(name: str) -> int | None:
    """The decoder-layer index of a tensor name, or None (embeddings, final norm, head)."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else None


def module_of(name: str) -> str | None:
    """``"attn"``, ``"mlp"`` or None (layer norms and everything outside the layers)."""
    if layer_of(name) is None:
        return None
    if _ATTN.search(name):
        return "attn"
    if _MLP.search(name):
        return "mlp"
    return None


def _check_lam(lam) -> float:
    """λ as a float: any real number (numpy scalars too, bool refused), finite, in [0, 1]."""
    return checks.number("lam", lam, 0.0, 1.0)


def _layer_set(what: str, layers) -> frozenset[int] | None:
    """``layers`` (an iterable of layer indices, or None) as a set; ValueError naming ``what`` otherwise."""
    if layers is None:
        return None
    if isinstance(layers, (str, bytes, Mapping)) or not isinstance(layers, Iterable):
        raise ValueError(f"{what} must be an iterable of layer indices or None, got {reprlib.repr(layers)}")
    layers = list(layers)
    for i in layers:
        checks.integer(f"{what}[...]", i, 0)
    if not layers:
        raise ValueError(f"{what} must not be empty (None: {'every layer' if what == 'layers' else 'no layer'})")
    return frozenset(int(i) for i in layers)


def _module_set(what: str, modules) -> frozenset[str] | None:
    """``modules`` (one of :data:`MODULES`, an iterable of them, or None) as a set; ValueError otherwise."""
    if modules is None:
        return None
    if isinstance(modules, str):
        modules = [modules]
    elif isinstance(modules, (bytes, Mapping)) or not isinstance(modules, Iterable):
        raise ValueError(f"{what} must be a non-empty subset of {MODULES} or None, got {reprlib.repr(modules)}")
    modules = list(modules)
    bad = [m for m in modules if not isinstance(m, str) or m not in MODULES]
    if bad or not modules:
        raise ValueError(f"{what} must be a non-empty subset of {MODULES} or None, got {reprlib.repr(modules)}")
    return frozenset(modules)


def _selection(layers, modules, skip=None, skip_layers=None) -> tuple:
    """The restriction (``layers``, ``modules``) and the skips (``skip``, ``skip_layers``) as sets or None."""
    return (_layer_set("layers", layers), _module_set("modules", modules), _module_set("skip", skip),
            _layer_set("skip_layers", skip_layers))


def selected(name: str, layers: frozenset[int] | None, modules: frozenset[str] | None,
             skip: frozenset[str] | None = None, skip_layers: frozenset[int] | None = None) -> bool:
    """Whether tensor ``name`` is interpolated: the restriction (``layers``, ``modules``; both None: every
    tensor) selects it, and neither ``skip`` (its sub-module) nor ``skip_layers`` (its layer) names it."""
    layer = layer_of(name)
    if skip is not None and layer is not None and module_of(name) in skip:
        return False
    if skip_layers is not None and layer is not None and layer in skip_layers:
        return False
    if layers is None and modules is None:
        return True
    if layer is None:
        return False
    if layers is not None and layer not in layers:
        return False
    if modules is not None and module_of(name) not in modules:
        return False
    return True


def _check_present(names: Iterable[str], layers: frozenset[int] | None, skip_layers: frozenset[int] | None) -> None:
    """Every layer ``layers`` and ``skip_layers`` name is a layer of the model (ValueError otherwise)."""
    present = {layer_of(n) for n in names} - {None}
    for what, sel in (("layers", layers), ("skip_layers", skip_layers)):
        missing = sorted(set(sel or ()) - present)
        if missing:
            raise ValueError(f"{what} {missing[:8]} are not layers of these models (they have {len(present)})")


def lerp(a: torch.Tensor, b: torch.Tensor, lam: float, name: str = "tensor") -> torch.Tensor:
    """``a + lam (b - a)`` in ``a``'s dtype; exactly ``a`` at 0 and ``b`` at 1."""
    if a.shape != b.shape:
        raise ValueError(f"{name}: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")
    if a.dtype != b.dtype:
        raise ValueError(f"{name}: dtypes differ, {a.dtype} vs {b.dtype}")
    if lam == 0.0:
        return a.detach().clone()
    if lam == 1.0:
        return b.detach().clone()
    if not a.is_floating_point():
        if torch.equal(a, b):
            return a.detach().clone()
        raise ValueError(f"{name}: a non-floating tensor that differs between the two models cannot be interpolated")
    # one fused kernel, no temporaries; low-precision dtypes are computed in float32 and rounded once
    return torch.lerp(a.detach(), b.detach(), lam)


def _check_keys(instruct: Mapping, thinking: Mapping) -> None:
    ka, kb = set(instruct), set(thinking)
    if ka != kb:
        only_a, only_b = sorted(ka - kb)[:3], sorted(kb - ka)[:3]
        raise ValueError(f"the state dicts have different keys: only in instruct {only_a}, only in thinking {only_b}")


def interpolate(instruct: Mapping[str, torch.Tensor], thinking: Mapping[str, torch.Tensor], lam: float, *,
                layers: Iterable[int] | None = None, modules: str | Iterable[str] | None = None,
                skip: str | Iterable[str] | None = None,
                skip_layers: Iterable[int] | None = None) -> dict[str, torch.Tensor]:
    """Θ(λ) for every tensor (see the module docstring); a new state dict, the inputs untouched.

    ``skip``: sub-modules ("attn", "mlp") left at Instruct, every other tensor interpolated; ``skip_layers``:
    decoder layers left at Instruct, every other tensor interpolated (the paper's ablations, §5.3)."""
    lam = _check_lam(lam)
    layers, modules, skip, skip_layers = _selection(layers, modules, skip, skip_layers)
    _check_keys(instruct, thinking)
    _check_present(instruct, layers, skip_layers)
    out = {}
    for name, a in instruct.items():
        b = thinking[name]
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            raise ValueError(f"{name}: not a tensor")
        if selected(name, layers, modules, skip, skip_layers):
            out[name] = lerp(a, b, lam, name)
        else:
            if a.shape != b.shape:
                raise ValueError(f"{name}: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")
            out[name] = a.detach().clone()
    return out


def similarity(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], *, reduce: str = "mean") -> float:
    """σ = Σ|A−B| / (Σ|A| + Σ|B|): per tensor, then averaged over tensors (``"mean"``, the paper's
    figure) or pooled over all floating tensors (``"pooled"``). 0: identical, 1: e.g. B = −A.
    A tensor holding NaN or inf gives NaN (it is never skipped as if it had no norm)."""
    if reduce not in ("mean", "pooled"):
        raise ValueError(f"reduce must be 'mean' or 'pooled', got {reduce!r}")
    _check_keys(a, b)
    per, num, den = [], 0.0, 0.0
    for name, x in a.items():
        y = b[name]
        if x.shape != y.shape:
            raise ValueError(f"{name}: shapes differ, {tuple(x.shape)} vs {tuple(y.shape)}")
        if not x.is_floating_point():
            continue
        x64, y64 = x.detach().double(), y.detach().double()
        n, d = float((x64 - y64).abs().sum()), float(x64.abs().sum() + y64.abs().sum())
        num, den = num + n, den + d
        if d > 0 or math.isnan(d):  # NaN: d > 0 is False, but the tensor must not drop out
            per.append(n / d)
    if not per:
        raise ValueError("no floating tensor with a non-zero norm to compare")
    return float(sum(per) / len(per)) if reduce == "mean" else num / den


def endpoint_error(instruct: Mapping[str, torch.Tensor], thinking: Mapping[str, torch.Tensor]) -> float:
    """max |Θ(0) − Instruct| and |Θ(1) − Thinking| over every tensor (:func:`interpolate`'s ends): 0 when they
    are bit for bit the two models, inf when a dtype, a shape or a non-float tensor differs."""
    worst = 0.0
    for lam, ref in ((0.0, instruct), (1.0, thinking)):
        merged = interpolate(instruct, thinking, lam)
        for k, v in merged.items():
            r = ref[k]
            if v.dtype != r.dtype or v.shape != r.shape:
                return math.inf
            if v.is_floating_point():
                both_nan = torch.isnan(v) & torch.isnan(r)
                d = torch.where(both_nan, 0.0, (v.double() - r.double()).abs())
                d = torch.nan_to_num(d, nan=math.inf)  # NaN on one side only
                worst = max(worst, float(d.max()) if d.numel() else 0.0)
            elif not torch.equal(v, r):
                worst = math.inf
    return worst


# --------------------------------------------------------------------------------------------
# streamed over safetensors files


def _json(data: bytes):
    """``data`` parsed as JSON; ValueError (naming what is wrong, not the file) when it is not JSON, not
    UTF-8, or nested too deep to parse (a RecursionError would be a bug's internal error)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        first = (str(exc).splitlines() or [""])[0][:160]
        raise ValueError(f"not JSON: {type(exc).__name__}: {first}") from None


def _read_index(index: Path) -> dict:
    """The ``weight_map`` of a ``model.safetensors.index.json``; ValueError naming the file when it is too
    large, not JSON, or not an object whose ``weight_map`` maps tensor names to file names."""
    try:
        size = index.stat().st_size
        if size > MAX_JSON_BYTES:
            raise ValueError(f"{size} bytes, more than an index's {MAX_JSON_BYTES}")
        info = _json(index.read_bytes())
        if not isinstance(info, dict) or "weight_map" not in info:
            raise ValueError("no weight_map" if isinstance(info, dict) else f"a JSON {type(info).__name__}")
    except ValueError as exc:
        raise ValueError(f"{index}: not a valid safetensors index ({exc})") from None
    weight_map = info["weight_map"]
    if not isinstance(weight_map, dict) or not weight_map \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
        raise ValueError(f"{index}: not a valid safetensors index (its weight_map must map tensor names "
                         f"to file names)")
    return weight_map


def _shards(folder: Path) -> dict[str, Path]:
    """tensor name -> the safetensors file holding it.

    A damaged ``model.safetensors.index.json`` (not JSON, nested too deep, no ``weight_map``, a file it
    names that is missing or outside ``folder``) or safetensors header raises ValueError, one line naming
    the file."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        out = {}
        for k, v in _read_index(index).items():
            pure = Path(v)
            if not v or pure.is_absolute() or ".." in pure.parts:
                raise ValueError(f"{index}: names the file {v!r} (for {k!r}), which is not a file name in {folder}")
            if not (folder / v).is_file():
                raise ValueError(f"{index}: names the file {v!r} (for {k!r}), which is not in {folder}")
            out[k] = folder / v
        return out
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no safetensors files")
    out = {}
    for f in files:
        r = _Reader(f)
        r.close()
        for k in r.header:
            out[k] = f
    return out


_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
              "BOOL": torch.bool}


class _Reader:
    """Reads single tensors from a safetensors file with plain reads (no memory map), so the file's pages
    do not count towards this process's memory and each tensor is freed when dropped."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fh = open(self.path, "rb")
        try:
            self.header, self.base = self._read_header(self.path.stat().st_size)
        except ValueError as exc:
            self.fh.close()
            raise ValueError(f"{self.path}: corrupt safetensors header ({exc})") from None

    def _read_header(self, size: int) -> tuple[dict, int]:
        """The tensors' entries, checked against the file's size, and where the data starts; ValueError
        (naming what is wrong, without the path) for a damaged header."""
        head = self.fh.read(8)
        if len(head) < 8:
            raise ValueError(f"the file has {size} bytes, fewer than the 8 of the header's length")
        n = int.from_bytes(head, "little")
        if n > size - 8:
            raise ValueError(f"it claims a {n}-byte header in a file of {size} bytes")
        if n > MAX_JSON_BYTES:
            raise ValueError(f"it claims a {n}-byte header, more than safetensors' {MAX_JSON_BYTES}")
        header = _json(self.fh.read(n))
        if not isinstance(header, dict):
            raise ValueError(f"a JSON {type(header).__name__}, not an object")
        header.pop("__metadata__", None)
        data = size - 8 - n
        for name, meta in header.items():
            ok = isinstance(meta, dict) and isinstance(meta.get("dtype"), str) \
                and isinstance(meta.get("shape"), list) and isinstance(meta.get("data_offsets"), list) \
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in meta["shape"]) \
                and len(meta["data_offsets"]) == 2 \
                and all(isinstance(o, int) and not isinstance(o, bool) for o in meta["data_offsets"])
            if not ok:
                raise ValueError(f"tensor {name}: its entry is not {{dtype, shape, data_offsets}}: {reprlib.repr(meta)}")
            lo, hi = meta["data_offsets"]
            if not 0 <= lo <= hi <= data:
                raise ValueError(f"tensor {name}: bytes {lo}..{hi} lie outside the {data} data bytes (truncated?)")
        return header, 8 + n

    def get(self, name: str) -> torch.Tensor:
        if name not in self.header:
            raise ValueError(f"{self.path}: no tensor {name} in it (its index says there is)")
        meta = self.header[name]
        if meta["dtype"] not in _ST_DTYPES:
            raise ValueError(f"{self.path}: tensor {name} has the unsupported safetensors dtype {meta['dtype']!r}")
        lo, hi = meta["data_offsets"]
        dtype = _ST_DTYPES[meta["dtype"]]
        numel = math.prod(meta["shape"])
        if hi - lo != numel * torch.empty((), dtype=dtype).element_size():
            raise ValueError(f"{self.path}: tensor {name} has {hi - lo} bytes for shape {meta['shape']} {meta['dtype']}")
        buf = bytearray(hi - lo)
        self.fh.seek(self.base + lo)
        if self.fh.readinto(buf) != hi - lo:
            raise ValueError(f"{self.path}: truncated tensor {name}")
        if not buf:
            return torch.empty(meta["shape"], dtype=_ST_DTYPES[meta["dtype"]])
        return torch.frombuffer(buf, dtype=_ST_DTYPES[meta["dtype"]]).reshape(meta["shape"])

    def close(self):
        self.fh.close()


def interpolate_files(instruct_dir, thinking_dir, out_dir, lam: float, *, layers: Iterable[int] | None = None,
                      modules: str | Iterable[str] | None = None, skip: str | Iterable[str] | None = None,
                      skip_layers: Iterable[int] | None = None, shard_bytes: int = 256 * 2**20,
                      overwrite: bool = False) -> Path:
    """Θ(λ) of two checkpoints on disk into ``out_dir``, streamed tensor by tensor.

    Reads each tensor of both inputs with plain file reads (not memory-mapped), writes output shards
    of at most ``shard_bytes`` (and an index when there is more than one), then copies the Thinking
    model's config, generation config and tokenizer files. The folder appears only when complete.

    ``out_dir`` may be new, empty, or a merge written here before (unchanged since); anything else
    there (another model, a user's files, a file) is refused unless ``overwrite``. An ``out_dir``
    that is, or holds, either input is always refused (:mod:`acl26.io`). ``layers``, ``modules``, ``skip``
    and ``skip_layers`` are :func:`interpolate`'s.
    """
    from safetensors.torch import save_file

    lam = _check_lam(lam)
    sel_layers, sel_modules, sel_skip, sel_skip_layers = _selection(layers, modules, skip, skip_layers)
    checks.integer("shard_bytes", shard_bytes, 1)
    a_dir, b_dir, out_dir = Path(instruct_dir), Path(thinking_dir), Path(out_dir)
    a_map, b_map = _shards(a_dir), _shards(b_dir)
    # the inputs are both folders and every file read (a shard may be a link to a file elsewhere)
    inputs = (a_dir, b_dir, *set(a_map.values()), *set(b_map.values()))
    io.check_target(out_dir, kind="folder", overwrite=overwrite, inputs=inputs, name="out_dir")
    try:
        _check_keys(a_map, b_map)
    except ValueError as exc:
        raise ValueError(f"{a_dir} and {b_dir}: {exc}") from None
    _check_present(a_map, sel_layers, sel_skip_layers)
    names = sorted(a_map)
    with io.atomic_dir(out_dir, overwrite=overwrite, inputs=inputs, name="out_dir") as tmp:
        shard: dict[str, torch.Tensor] = {}
        size, files, total = 0, [], 0
        weight_map = {}

        def flush():
            nonlocal shard, size
            if shard:
                fname = f"model-{len(files) + 1:05d}.safetensors"
                save_file(shard, str(tmp / fname), metadata={"format": "pt"})
                for k in shard:
                    weight_map[k] = fname
                files.append(fname)
                shard, size = {}, 0

        handles: dict[Path, _Reader] = {}
        try:
            def get(path: Path, name: str) -> torch.Tensor:
                if path not in handles:
                    handles[path] = _Reader(path)
                return handles[path].get(name)

            for name in names:
                a = get(a_map[name], name)
                b = get(b_map[name], name)
                if a.shape != b.shape:
                    raise ValueError(f"{name}: shapes differ, {tuple(a.shape)} vs {tuple(b.shape)}")
                t = lerp(a, b, lam, name) if selected(name, sel_layers, sel_modules, sel_skip, sel_skip_layers) else a
                del a, b
                nbytes = t.numel() * t.element_size()
                if shard and size + nbytes > shard_bytes:
                    flush()
                shard[name] = t.contiguous()
                size += nbytes
                total += nbytes
            flush()
        finally:
            for h in handles.values():
                h.close()
        if len(files) == 1:
            (tmp / files[0]).rename(tmp / "model.safetensors")
        else:
            io.write_json(tmp / "model.safetensors.index.json",
                          {"metadata": {"total_size": total}, "weight_map": weight_map})
        weights = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".h5", ".msgpack")
        for f in b_dir.iterdir():  # config, generation config, tokenizer: not the Thinking model's weights
            if (f.is_file() and not f.name.endswith(weights) and not f.name.endswith(".index.json")
                    and f.name not in (io.DIR_MARKER, io.FILE_LEDGER)):
                shutil.copy2(f, tmp / f.name)
        io.write_json(tmp / "interpolation.json",
                      {"lambda": lam, "instruct": str(a_dir), "thinking": str(b_dir),
                       "layers": sorted(sel_layers) if sel_layers is not None else None,
                       "modules": sorted(sel_modules) if sel_modules is not None else None,
                       "skip": sorted(sel_skip) if sel_skip is not None else None,
                       "skip_layers": sorted(sel_skip_layers) if sel_skip_layers is not None else None})
    return out_dir


# --------------------------------------------------------------------------------------------
# baselines through mergekit


def _mergekit(base, models: Mapping[str, Mapping[str, torch.Tensor]], method: str, parameters: dict):
    from mergekit.merge_methods import merge_state_dicts

    if "base" in models:
        raise ValueError("models: 'base' is the name of the base; give the fine-tuned models other names")
    inputs = {"base": base, **models}
    keys = set(base)
    for name, sd in models.items():
        if set(sd) != keys:
            raise ValueError(f"{name}: its keys differ from the base's")
    dtypes = {k: v.dtype for k, v in base.items()}
    with torch.no_grad():
        out = merge_state_dicts(inputs, method, parameters=parameters, base="base")
    return {k: v.to(dtypes[k]) if v.dtype != dtypes[k] else v for k, v in out.items()}


def task_arithmetic(base: Mapping[str, torch.Tensor], models: Mapping[str, Mapping[str, torch.Tensor]], *,
                    scale: float = 0.7) -> dict[str, torch.Tensor]:
    """Task Arithmetic: Θ = Θ_base + scale·Σ_m (Θ_m − Θ_base) (the paper's α = 0.7 on both task vectors),
    through mergekit's ``task_arithmetic`` (weights = scale, no normalisation)."""
    checks.number("scale", scale, 0)
    if not models:
        raise ValueError("models must name at least one fine-tuned model")
    weight = {m: scale for m in models}
    return _mergekit(base, models, "task_arithmetic", {"weight": weight, "normalize": False})


def ties(base: Mapping[str, torch.Tensor], models: Mapping[str, Mapping[str, torch.Tensor]], *,
         density: float = 0.2, scale: float = 0.5) -> dict[str, torch.Tensor]:
    """TIES-merging (Yadav et al. 2023) through mergekit's ``ties``.

    Each task vector keeps its ``density`` largest-magnitude entries (trim); each entry's sign is
    elected by the sign of the summed trimmed vectors (elect); the entries that agree with it are
    averaged (disjoint mean); the merged vector is added to the base times ``scale`` (the TIES
    paper's λ). In mergekit: ``weight`` 1 for every model, ``normalize=True`` (so the disjoint mean
    divides by the *count* of agreeing entries, as TIES and peft do) and ``lambda=scale``. Reading
    "scale 0.5" as mergekit weights of 0.5 with normalisation would cancel out (a weighted mean of
    agreeing entries); weights 0.5 without normalisation would be a sum scaled by 0.5, i.e. the
    same as ours only where both task vectors agree.
    """
    checks.number("density", density, 0, 1, lo_open=True)
    checks.number("scale", scale, 0)
    if not models:
        raise ValueError("models must name at least one fine-tuned model")
    params = {"weight": {m: 1.0 for m in models}, "density": {m: density for m in models}, "normalize": True,
              "lambda": scale}
    return _mergekit(base, models, "ties", params)
