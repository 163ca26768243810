"""The study's results as JSON that reads back as they were, so a verdict can be decided again later.

A notebook's ``record_claims(ledger, res)`` reads ``res``, the dict its study returned: numbers,
lists, numpy arrays, dicts keyed by seeds (ints), tuples, pandas frames, acl26 dataclasses.
:func:`encode` turns it into plain JSON, tagging what JSON cannot hold as it is (``{"__acl26__":
kind, ...}``); :func:`decode` gives back an equal object. :meth:`acl26.claims.Ledger.save` stores it
in the results file as ``evidence``, and ``acl26 verify`` (:mod:`acl26.provenance`) decides every
verdict again from it with the current ``record_claims``.

What cannot be stored (a model, a tokenizer) is kept as its type's name and decodes to an
:class:`Omitted`, which raises :class:`EvidenceError` the moment a verdict reads it: the results
then say which value a verdict needed, instead of a wrong verdict.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from pathlib import PurePath
from typing import Any

TAG = "__acl26__"


class EvidenceError(ValueError):
    """A verdict read a value the results file could not keep, or the evidence is malformed."""


class Omitted:
    """A value the results could not keep (its type's name): any use raises :class:`EvidenceError`."""

    def __init__(self, type_name: str, where: str):
        object.__setattr__(self, "_what", (type_name, where))

    def _fail(self, *_a, **_k):
        type_name, where = object.__getattribute__(self, "_what")
        raise EvidenceError(f"the verdicts read {where} (a {type_name}), which the results file could not keep")

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):  # protocol probes (copy, numpy, hasattr): not a read
            raise AttributeError(name)
        self._fail()

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    __getitem__ = __iter__ = __len__ = __call__ = __float__ = __int__ = __bool__ = __contains__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __add__ = __sub__ = __mul__ = __truediv__ = _fail

    def __eq__(self, other):
        return isinstance(other, Omitted) and object.__getattribute__(self, "_what") == object.__getattribute__(other, "_what")

    def __hash__(self):
        return hash(object.__getattribute__(self, "_what"))

    def __repr__(self):
        type_name, where = object.__getattribute__(self, "_what")
        return f"Omitted({type_name} at {where})"


def _type_path(obj) -> str:
    t = type(obj)
    return f"{t.__module__}:{t.__qualname__}"


def _import_type(path: str):
    module, _, qual = path.partition(":")
    if not (module == "acl26" or module.startswith("acl26.")):
        raise EvidenceError(f"evidence names a type outside acl26: {path}")
    obj = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _float(x: float):
    return x if math.isfinite(x) else {TAG: "float", "value": repr(x)}


def encode(obj: Any, where: str = "res") -> Any:
    """``obj`` as JSON-safe data that :func:`decode` turns back into an equal object."""
    import numpy as np

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int) and type(obj) in (int,):
        return obj
    if type(obj) is float:
        return _float(obj)
    if isinstance(obj, (np.ndarray, np.generic)) and (obj.dtype.kind in "fc" and obj.dtype.itemsize > 16 // (
            1 if obj.dtype.kind == "c" else 2)):
        return {TAG: "omitted", "type": f"numpy.{obj.dtype.name}", "where": where}  # long double: no JSON number
    if isinstance(obj, np.generic):
        if obj.dtype.kind in "mMc":
            return {TAG: "npscalar", "dtype": obj.dtype.str, "array": encode(np.asarray(obj).reshape(1), where)}
        return {TAG: "npscalar", "dtype": obj.dtype.str, "value": encode(obj.item(), where)}
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "biufcmM":  # numbers, datetimes, durations: their bytes, exactly and compactly
            import base64

            data = np.ascontiguousarray(obj, dtype=obj.dtype.newbyteorder("<") if obj.dtype.itemsize > 1 else obj.dtype)
            return {TAG: "ndarray", "dtype": data.dtype.str, "shape": list(obj.shape),
                    "base64": base64.b64encode(data.tobytes()).decode("ascii")}
        if obj.dtype.kind not in "biuf":
            return {TAG: "ndarray", "dtype": "object", "shape": list(obj.shape),
                    "items": [encode(x, f"{where}[{i}]") for i, x in enumerate(obj.ravel().tolist())]}
        return {TAG: "ndarray", "dtype": obj.dtype.str, "shape": list(obj.shape),
                "items": [_float(x) if isinstance(x, float) else x for x in obj.ravel().tolist()]}
    if isinstance(obj, dict):
        if all(isinstance(k, str) for k in obj) and TAG not in obj:
            return {k: encode(v, f"{where}[{k!r}]") for k, v in obj.items()}
        return {TAG: "dict", "items": [[encode(k, where), encode(v, f"{where}[{k!r}]")] for k, v in obj.items()]}
    if isinstance(obj, list):
        return [encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple) and hasattr(obj, "_fields") and type(obj).__module__.startswith("acl26"):
        return {TAG: "namedtuple", "type": _type_path(obj), "items": [encode(v, f"{where}.{f}") for f, v in
                                                                      zip(obj._fields, obj)]}
    if isinstance(obj, tuple):
        return {TAG: "tuple", "items": [encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
    if isinstance(obj, (set, frozenset)):
        return {TAG: "frozenset" if isinstance(obj, frozenset) else "set",
                "items": [encode(v, where) for v in sorted(obj, key=repr)]}
    if isinstance(obj, int):  # an int subclass (IntEnum): its value
        return int(obj)
    if isinstance(obj, float):
        return _float(float(obj))
    if isinstance(obj, PurePath):
        return {TAG: "path", "value": str(obj)}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and type(obj).__module__.startswith("acl26"):
        return {TAG: "dataclass", "type": _type_path(obj),
                "fields": {f.name: encode(getattr(obj, f.name), f"{where}.{f.name}") for f in dataclasses.fields(obj)
                           if f.init}}
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a core dependency
        pd = None
    if pd is not None and isinstance(obj, pd.DataFrame):
        return {TAG: "DataFrame", "columns": encode(list(obj.columns), where),
                "index": encode(list(obj.index), where), "index_names": encode(list(obj.index.names), where),
                "columns_names": encode(list(obj.columns.names), where),
                "data": {str(i): encode(obj.iloc[:, i].to_numpy(), f"{where}[{c!r}]") for i, c in enumerate(obj.columns)}}
    if pd is not None and isinstance(obj, pd.Series):
        return {TAG: "Series", "name": encode(obj.name, where), "index": encode(list(obj.index), where),
                "index_names": encode(list(obj.index.names), where), "values": encode(obj.to_numpy(), where)}
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    if torch is not None and isinstance(obj, torch.Tensor) and obj.layout == torch.strided:
        t = obj.detach().cpu()
        if t.dtype == torch.bfloat16:
            t = t.float()
        return {TAG: "tensor", "array": encode(t.numpy(), where)}
    return {TAG: "omitted", "type": f"{type(obj).__module__}.{type(obj).__qualname__}", "where": where}


def _index(values, names):
    import pandas as pd

    if len(names) > 1:
        return pd.MultiIndex.from_tuples([tuple(v) for v in values], names=names)
    return pd.Index(values, name=names[0] if names else None)


def decode(data: Any) -> Any:
    """The object :func:`encode` was given."""
    import numpy as np

    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    kind = data.get(TAG)
    if kind is None:
        return {k: decode(v) for k, v in data.items()}
    try:
        if kind == "float":
            return float(data["value"])
        if kind == "npscalar":
            if "array" in data:
                return decode(data["array"])[0]
            return np.dtype(data["dtype"]).type(decode(data["value"]))
        if kind == "ndarray" and "base64" in data:
            import base64

            raw = base64.b64decode(data["base64"], validate=True)
            return np.frombuffer(raw, dtype=np.dtype(data["dtype"])).reshape(data["shape"]).copy()
        if kind == "ndarray":
            items = [decode(x) for x in data["items"]]
            dtype = np.dtype(data["dtype"]) if data["dtype"] != "object" else None
            if dtype is None:
                arr = np.empty(len(items), dtype=object)
                for i, v in enumerate(items):  # one by one: numpy would probe a sequence-like item
                    arr[i] = v
                return arr.reshape(data["shape"])
            if dtype.kind in "mM":
                return np.array(items, dtype=np.int64).view(dtype).reshape(data["shape"])
            if dtype.kind == "c":
                return np.array([complex(re, im) for re, im in items], dtype=dtype).reshape(data["shape"])
            return np.array(items, dtype=dtype).reshape(data["shape"])
        if kind == "dict":
            return {_hashable(decode(k)): decode(v) for k, v in data["items"]}
        if kind == "tuple":
            return tuple(decode(v) for v in data["items"])
        if kind == "set":
            return {_hashable(decode(v)) for v in data["items"]}
        if kind == "frozenset":
            return frozenset(_hashable(decode(v)) for v in data["items"])
        if kind == "path":
            from pathlib import Path

            return Path(data["value"])
        if kind == "namedtuple":
            return _import_type(data["type"])(*[decode(v) for v in data["items"]])
        if kind == "dataclass":
            return _import_type(data["type"])(**{k: decode(v) for k, v in data["fields"].items()})
        if kind == "DataFrame":
            import pandas as pd

            columns = decode(data["columns"])
            cols = {i: decode(data["data"][str(i)]) for i in range(len(columns))}
            df = pd.DataFrame({i: cols[i] for i in range(len(columns))},
                              index=_index(decode(data["index"]), decode(data["index_names"])))
            names = decode(data["columns_names"])
            df.columns = (pd.MultiIndex.from_tuples([tuple(c) for c in columns], names=names) if len(names) > 1
                          else pd.Index(columns, name=names[0] if names else None))
            return df
        if kind == "Series":
            import pandas as pd

            return pd.Series(decode(data["values"]), index=_index(decode(data["index"]), decode(data["index_names"])),
                             name=decode(data["name"]))
        if kind == "tensor":
            import torch

            return torch.from_numpy(np.ascontiguousarray(decode(data["array"])))
        if kind == "omitted":
            return Omitted(data["type"], data["where"])
    except EvidenceError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ImportError) as exc:
        raise EvidenceError(f"malformed evidence of kind {kind!r}: {type(exc).__name__}: {exc}") from exc
    raise EvidenceError(f"unknown evidence kind {kind!r}")


def _reads_key(name: str):
    """``dict.<name>(self, key, ...)``, noting ``key`` as read."""
    def method(self, key, *args):
        self.read.add(key)
        return getattr(dict, name)(self, key, *args)
    return method


def _reads_all(name: str):
    """``dict.<name>(self, ...)``, noting every key as read (iteration, size, equality, copies)."""
    def method(self, *args):
        self.read.update(dict.keys(self))
        return getattr(dict, name)(self, *args)
    return method


class _Tracked(dict):
    """A dict that notes which of its keys are read (by key, ``get``, ``in``, ``pop``, ``setdefault``; all of
    them by iteration, ``len``, equality, copies and pickling)."""

    def __init__(self, data: dict):
        super().__init__(data)
        self.read: set = set()

    __getitem__, get, __contains__, pop, setdefault = (
        _reads_key(n) for n in ("__getitem__", "get", "__contains__", "pop", "setdefault"))
    keys, values, items, __iter__, __reversed__, __len__, __eq__, popitem = (
        _reads_all(n) for n in ("keys", "values", "items", "__iter__", "__reversed__", "__len__", "__eq__", "popitem"))
    __hash__ = None

    def copy(self):
        self.read.update(dict.keys(self))
        return dict(dict.items(self))

    def __reduce_ex__(self, protocol):  # copy.deepcopy / pickle read every value
        self.read.update(dict.keys(self))
        return dict, (dict(dict.items(self)),)


def read_by(record_claims, ledger, results: dict) -> dict:
    """The part of ``results`` that ``record_claims(ledger, results)`` reads: the top-level keys it looks
    up (by key, ``get`` or ``in``; all of them where it iterates), each with its whole value. A key it
    asks for that is absent stays absent. Runs ``record_claims`` on ``ledger`` (give it a scratch one)."""
    tracked = _Tracked(results)
    record_claims(ledger, tracked)
    return {k: v for k, v in results.items() if k in tracked.read}


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, set):
        return frozenset(v)
    return v
