"""Sherry (ACL 2026, arXiv 2601.07892): a whole model in one file, its ternary layers packed.

The paper's size table gives whole-model files (0.7B: BF16 1360 MB, I2_S 256.56 MB, Sherry 205.50
MB). :func:`save_model` writes a QAT model of :mod:`acl26.papers.sherry.qat` the same way, in one of
three weight formats, so that the chapter decides its size claim on the bytes of real files; and
:func:`verify` reads a file back and checks, tensor by tensor and bit for bit, that it holds what
the fake-quantized model computes with.

File format
-----------
A `safetensors <https://github.com/huggingface/safetensors>`_ file: 8 bytes (little-endian u64)
giving the length of a JSON header, the header (every tensor's dtype, shape and byte range, and a
``__metadata__`` map of strings), then the tensors' raw bytes. Ours holds:

* for each quantized layer ``<name>`` (the decoder blocks' linear layers, :func:`~.qat.quantized_layers`):

  - weights ``"sherry"``: ``<name>.codes`` and ``<name>.signs`` (uint8), the streams of
    :func:`acl26.kernels.ternary.pack_sherry` (1.25 bits per weight; the byte layout is in that
    module's docstring), and ``<name>.scale`` (float32, one per output row; shape ``()`` for a
    per-tensor scale);
  - weights ``"i2"``: ``<name>.codes`` of :func:`~acl26.kernels.ternary.pack_i2` (2 bits per weight;
    no sign stream) and ``<name>.scale``;
  - weights ``"bf16"``: ``<name>.weight`` in bfloat16 (the layer's latent full-precision weight);

  and ``<name>.bias`` in bfloat16 where the layer has one;
* every other tensor of the model's ``state_dict`` (embeddings, norms) in bfloat16, as the paper's
  ternary models keep them in 16 bits; an output head tied to the embeddings is stored once, under
  the embedding's name (``tied`` says so).

``__metadata__``: ``"acl26"`` = :data:`MAGIC`; ``"weights"`` (the format); ``"quantized"`` (JSON:
layer name -> ``{"shape": [out, in], "mode": "sparse34" | "absmean" | "absmean_row", "bias": bool}``); ``"tied"``
(JSON: alias -> stored name); ``"config"`` (the model's transformers config, JSON); ``"sha256"``,
the hex SHA-256 over the tensors in name order, each as ``name|dtype|shape|`` followed by its raw
bytes. :func:`load_model` refuses, with a one-line ``ValueError`` naming the file, a file that is not
ours, is truncated or altered (the digest), or whose streams do not fit their layer's shape.

Files are written through :func:`acl26.io.atomic_path`: beside the target, renamed into place, and
never over a file acl26 did not write (unless ``overwrite``).
"""

from __future__ import annotations

import hashlib
import json
import math
import weakref
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from acl26 import io
from acl26.errors import one_line
from acl26.papers.sherry import qat

MAGIC = "acl26-sherry-model/1"
WEIGHTS = ("sherry", "i2", "bf16")
#: the dtype of every tensor that is not a packed stream or a scale
REST_DTYPE = torch.bfloat16


class ModelFile(NamedTuple):
    """A file read back by :func:`load_model`."""

    path: Path
    weights: str  # "sherry", "i2" or "bf16"
    quantized: dict  # layer name -> {"shape", "mode", "bias"}
    tied: dict  # alias -> stored name
    config: dict
    tensors: dict  # name -> torch.Tensor, as stored

    def packed(self, layer: str):
        """The :class:`acl26.kernels.ternary.Packed` streams of a quantized layer (sherry or i2 files)."""
        from acl26.kernels import ternary

        if self.weights == "bf16":
            raise ValueError(f"{self.path}: a bf16 file holds no packed streams")
        codes = self.tensors[f"{layer}.codes"].numpy()
        signs = (self.tensors[f"{layer}.signs"].numpy() if self.weights == "sherry"
                 else np.zeros((codes.shape[0], 0), np.uint8))
        return ternary.Packed(self.weights, tuple(self.quantized[layer]["shape"]), codes, signs)

    def ternary(self, layer: str) -> tuple[np.ndarray, np.ndarray]:
        """``(T, scale)`` of a quantized layer: the unpacked int8 ternary matrix and its float32 scale(s)."""
        from acl26.kernels import ternary

        packed = self.packed(layer)
        T = ternary.unpack_sherry(packed) if self.weights == "sherry" else ternary.unpack_i2(packed)
        return T, self.tensors[f"{layer}.scale"].numpy()

    def layer_bytes(self) -> int:
        """Bytes of the quantized layers' tensors (streams, scales and biases; or their bf16 weights)."""
        prefixes = tuple(f"{n}." for n in self.quantized)
        return sum(_nbytes(t) for name, t in self.tensors.items() if name.startswith(prefixes))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


#: per layer, its last (T, scale, mode) and the weight's identity and version it was computed from:
#: writing and verifying three files quantizes each layer once, not five times
_TERNARY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _layer_ternary(module) -> tuple[torch.Tensor, torch.Tensor, str]:
    """``(T, scale, mode)`` of a quantized layer: exactly what its fake-quantized forward uses."""
    if not isinstance(module, qat.QuantLinear) or module.mode == "fp":
        raise ValueError(f"only ternary QuantLinear layers can be packed, got {type(module).__name__}"
                         + (f" of mode {module.mode!r}" if isinstance(module, qat.QuantLinear) else ""))
    w = module.weight
    key = (w._version, module.mode)
    hit = _TERNARY.get(module)
    if hit is not None and hit[0]() is w and hit[1] == key:  # the same tensor object, unchanged since
        return hit[2]
    t, s = qat.ternarize(w, module.mode)
    out = (t.to(torch.int8), s.detach().to(torch.float32), module.mode)
    _TERNARY[module] = (weakref.ref(w), key, out)
    return out


def _tensors(model, weights: str) -> tuple[dict, dict, dict]:
    """The tensors :func:`save_model` writes for ``model`` in ``weights``, with the ``quantized`` and
    ``tied`` metadata."""
    from acl26.kernels import ternary

    if weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    layers = dict(qat.quantized_layers(model))
    if not layers:
        raise ValueError("the model has no quantized layers (wrap it with acl26.papers.sherry.wrap first)")
    out, quantized = {}, {}
    for name, m in layers.items():
        if weights == "bf16":
            qat.check_finite(m.weight, f"{name}.weight")
            mode = getattr(m, "mode", "fp")
            out[f"{name}.weight"] = m.weight.detach().to(REST_DTYPE).contiguous()
        else:
            try:
                T, s, mode = _layer_ternary(m)  # refuses a non-finite weight
            except ValueError as exc:
                raise ValueError(f"{name}.weight: {exc}") from None
            if weights == "sherry" and mode != "sparse34":
                raise ValueError(f"{name}: the sherry format holds 3:4 ternary layers only, got mode {mode!r}")
            packed = (ternary.pack_sherry if weights == "sherry" else ternary.pack_i2)(T.numpy())
            out[f"{name}.codes"] = torch.from_numpy(packed.codes)
            if weights == "sherry":
                out[f"{name}.signs"] = torch.from_numpy(packed.signs)
            out[f"{name}.scale"] = s.contiguous()
        if m.bias is not None:
            out[f"{name}.bias"] = m.bias.detach().to(REST_DTYPE).contiguous()
        quantized[name] = {"shape": [m.out_features, m.in_features], "mode": mode, "bias": m.bias is not None}
    owned = {f"{n}.{p}" for n in layers for p in ("weight", "bias")}
    seen: dict[int, str] = {}
    tied = {}
    for name, t in model.state_dict(keep_vars=False).items():
        if name in owned:
            continue
        ptr = t.data_ptr()
        if ptr in seen and t.shape == out[seen[ptr]].shape:  # a tied tensor (the output head): stored once
            tied[name] = seen[ptr]
            continue
        seen[ptr] = name
        out[name] = t.detach().to(REST_DTYPE).contiguous()
    return out, quantized, tied


def _digest(tensors: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def save_model(model, path, weights: str = "sherry", *, overwrite: bool = False) -> Path:
    """Write ``model`` (its quantized layers :class:`~.qat.QuantLinear`) to ``path`` in ``weights``
    (``"sherry"``, ``"i2"`` or ``"bf16"``); see the module docstring for the format. Returns ``path``."""
    from safetensors.torch import save_file

    io.check_target(path, overwrite=overwrite)  # a target in the way costs a second, not the packing
    tensors, quantized, tied = _tensors(model, weights)
    meta = {"acl26": MAGIC, "weights": weights, "quantized": json.dumps(quantized), "tied": json.dumps(tied),
            "config": model.config.to_json_string(use_diff=False), "sha256": _digest(tensors)}
    with io.atomic_path(path, overwrite=overwrite) as tmp:
        save_file(tensors, str(tmp), metadata=meta)
    return Path(path)


def load_model(path) -> ModelFile:
    """Read a file :func:`save_model` wrote; refuses (one-line ValueError naming it) anything else."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such model file")

    def bad(why: str) -> ValueError:
        return ValueError(f"{path}: not a whole-model file acl26 wrote, or damaged: {why}")

    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for a bad header or buffer
        raise bad(one_line(exc)) from None
    if meta.get("acl26") != MAGIC:
        raise bad(f"its metadata names no {MAGIC!r} format")
    weights = meta.get("weights")
    if weights not in WEIGHTS:
        raise bad(f"unknown weights {weights!r}")
    try:
        quantized, tied, config = (json.loads(meta[k]) for k in ("quantized", "tied", "config"))
    except (KeyError, json.JSONDecodeError) as exc:
        raise bad(f"metadata {one_line(exc)}") from None
    if _digest(tensors) != meta.get("sha256"):
        raise bad("its tensors do not match the SHA-256 it was written with (altered or truncated)")
    mf = ModelFile(path, weights, quantized, tied, config, tensors)
    for name, info in quantized.items():
        rows, cols = info["shape"]
        if weights == "bf16":
            need = {f"{name}.weight": (torch.bfloat16, (rows, cols))}
        else:
            need = {f"{name}.scale": (torch.float32, (rows,) if info["mode"] in qat.ROW_SCALED else ())}
        for key, (dtype, shape) in need.items():
            t = tensors.get(key)
            if t is None or t.dtype != dtype or tuple(t.shape) != shape:
                raise bad(f"{key} must be {dtype} of shape {shape}, got "
                          + ("nothing" if t is None else f"{t.dtype} {tuple(t.shape)}"))
        if weights != "bf16":
            try:
                mf.packed(name)
            except (KeyError, ValueError) as exc:
                raise bad(f"{name}: {one_line(exc)}") from None
    return mf


def verify(model, path) -> dict:
    """Read ``path`` back and compare every tensor, bit for bit, with what ``model`` computes with.

    For a packed file (sherry, i2): each quantized layer's unpacked ternary matrix and scale equal
    the fake-quantizer's (:func:`~.qat.sparse34` / :func:`~.qat.absmean` of its weight), and every
    other tensor equals the model's, rounded to bfloat16. For a bf16 file: every tensor equals the
    model's, rounded to bfloat16. Returns ``{"exact", "mismatched" (names), "tensors" (compared),
    "layers", "weights" (quantized weights), "bytes" (the file's), "layer_bytes", "header_bytes" (the
    length field and the JSON header)}``.
    """
    mf = load_model(path)
    expected, quantized, tied = _tensors(model, "bf16")
    mismatched = []
    if quantized.keys() != mf.quantized.keys() or tied != mf.tied:
        mismatched.append("(the layer list)")
    compared = 0
    layers = dict(qat.quantized_layers(model))
    for name, t in expected.items():
        layer = name.rsplit(".", 1)[0]
        if mf.weights != "bf16" and layer in layers and name.endswith(".weight"):
            T, s, _ = _layer_ternary(layers[layer])
            try:
                T_file, s_file = mf.ternary(layer)
            except KeyError:
                mismatched.append(name)
                continue
            same = (np.array_equal(T_file, T.numpy())
                    and s_file.shape == tuple(s.shape) and np.array_equal(s_file.view(np.uint32), s.numpy().view(np.uint32)))
        else:
            got = mf.tensors.get(name)
            same = got is not None and got.dtype == t.dtype and got.shape == t.shape and torch.equal(
                got.view(torch.int16), t.view(torch.int16))
        compared += 1
        if not same:
            mismatched.append(name)
    n_weights = sum(math.prod(info["shape"]) for info in mf.quantized.values())
    with open(mf.path, "rb") as fh:
        header = 8 + int.from_bytes(fh.read(8), "little")
    return {"exact": not mismatched, "mismatched": mismatched, "tensors": compared, "layers": len(mf.quantized),
            "weights": n_weights, "bytes": mf.path.stat().st_size, "layer_bytes": mf.layer_bytes(),
            "header_bytes": header}


def model_from_file(path):
    """A transformers model rebuilt from a file: packed layers as :class:`~.qat.PackedLinear` running the
    format's kernel, everything else from its bfloat16 tensors (as float32)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    mf = load_model(path)
    cfg = dict(mf.config)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    model = AutoModelForCausalLM.from_config(config)
    layers = set(mf.quantized)
    state = {k: v.float() for k, v in mf.tensors.items()
             if mf.weights == "bf16" or k.rsplit(".", 1)[0] not in layers}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if mf.weights != "bf16":
        for name in layers:
            packed = mf.packed(name)
            bias = mf.tensors.get(f"{name}.bias")
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent), child,
                    qat.PackedLinear.from_packed(packed, mf.tensors[f"{name}.scale"], None if bias is None else bias.float()))
    missing = [k for k in missing if k.rsplit(".", 1)[0] not in layers and k not in mf.tied]
    if missing or unexpected:
        raise ValueError(f"{path}: the file does not fit its own config: missing {missing[:3]}, unexpected {unexpected[:3]}")
    if mf.tied:
        model.tie_weights()
    return model.eval()
