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
import math
import re
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
    t = obj if isinstance(obj, type) else type(obj)
    return f"{t.__module__}:{t.__qualname__}"


#: how deep :func:`decode` follows nested containers before it refuses the evidence (real results nest
#: about ten deep; a file that nests thousands deep is hostile, and would end in a RecursionError)
MAX_DEPTH = 100
#: the largest array, string or scalar :func:`decode` builds, in bytes (the evidence of a book profile
#: is a few MB; a type wider than this is refused before it is allocated)
MAX_BYTES = 1 << 30
#: dimensions of an array (numpy allows 64)
MAX_NDIM = 32

#: the dtype strings :func:`encode` writes: bool, integers, floats, complex (at most 16 bytes), dates and
#: durations with their unit, and the fixed-width strings of numpy string scalars
_DTYPE = re.compile(r"[<>|=]?(?:[biufc][0-9]{1,2}|[mM]8(?:\[[0-9]{0,6}[A-Za-z]{1,2}\])?|[US][0-9]{1,10})", re.ASCII)

#: the classes evidence may hold as themselves (``module:qualname`` -> class), registered with :func:`keep`;
#: the results of today's chapters hold none but plain data, numpy and pandas values
KEPT: dict[str, type] = {}


def keep(cls: type) -> type:
    """Register ``cls`` (a dataclass, or a named tuple) as a type evidence may hold: :func:`encode` writes it
    as itself and :func:`decode` builds it again; any other dataclass or named tuple is written as
    omitted. Register only plain records whose construction does nothing but hold (and check) its
    fields: decoding calls its ``__init__`` (and ``__post_init__``) with values from the file."""
    if not (dataclasses.is_dataclass(cls) and isinstance(cls, type)
            or isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields")):
        raise TypeError(f"evidence.keep: {cls!r} is not a dataclass or a named tuple")
    KEPT[_type_path(cls)] = cls
    return cls


def _kept(path, kind: str) -> type:
    """The registered class ``path`` names (see :data:`KEPT`), of the shape ``kind`` builds; anything else is
    an :class:`EvidenceError`. Nothing is imported or looked up by the name a file gives."""
    cls = KEPT.get(path) if isinstance(path, str) else None
    if cls is None:
        raise EvidenceError(f"evidence names {str(path)[:120]!r}, which is not a type evidence may hold "
                            f"(acl26.evidence.KEPT)")
    if (kind == "dataclass") != dataclasses.is_dataclass(cls):
        raise EvidenceError(f"evidence names {path!r} as a {kind}; it is not one")
    return cls


def _dtype(spec, kinds: str):
    """The numpy dtype ``spec`` names, refused unless it is one :func:`encode` writes, of one of ``kinds``."""
    import numpy as np

    if not (isinstance(spec, str) and _DTYPE.fullmatch(spec)):
        raise EvidenceError(f"evidence holds a dtype acl26 does not write: {str(spec)[:60]!r}")
    dtype = np.dtype(spec)
    if dtype.kind not in kinds:
        raise EvidenceError(f"evidence holds a {dtype} where only kinds {kinds!r} are kept")
    if dtype.itemsize > MAX_BYTES:
        raise EvidenceError(f"evidence holds a dtype of {dtype.itemsize} bytes an item (at most {MAX_BYTES})")
    return dtype


def _shape(shape, count: int | None, itemsize: int) -> tuple[int, ...]:
    """``shape`` checked: a list of sizes whose product is ``count`` items (the data the file holds) and
    whose bytes stay under :data:`MAX_BYTES`."""
    if not (isinstance(shape, list) and len(shape) <= MAX_NDIM
            and all(type(n) is int and n >= 0 for n in shape)):
        raise EvidenceError(f"evidence holds an array shape that is not a list of at most {MAX_NDIM} sizes")
    total = math.prod(shape)
    if total * max(itemsize, 1) > MAX_BYTES:
        raise EvidenceError(f"evidence holds an array of {total} items of {itemsize} bytes (at most {MAX_BYTES} bytes)")
    if count is not None and total != count:
        raise EvidenceError(f"evidence holds an array of shape {tuple(shape)} with {count} items")
    return tuple(shape)


def _str(value, what: str) -> str:
    if not isinstance(value, str):
        raise EvidenceError(f"evidence holds a {type(value).__name__} as {what}, not a string")
    return value


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
    if isinstance(obj, tuple) and hasattr(obj, "_fields") and _type_path(obj) in KEPT:
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
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type) and _type_path(obj) in KEPT:
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


def _column(values, n: int):
    """A frame's column (or a series' values) as :func:`encode` writes it: a 1-D array of the index's length
    (a scalar or a shorter array would be broadcast over the index, far past the file's own size)."""
    import numpy as np

    if not (isinstance(values, np.ndarray) and values.ndim == 1 and len(values) == n):
        raise EvidenceError(f"a column is not an array of the index's {n} rows")
    return values


def _index(values, names):
    import pandas as pd

    if len(names) > 1:
        return pd.MultiIndex.from_tuples([tuple(v) for v in values], names=names)
    return pd.Index(values, name=names[0] if names else None)


def decode(data: Any, *, _depth: int = 0) -> Any:
    """The object :func:`encode` was given.

    ``data`` is untrusted (a results file anyone may have written): only the kinds :func:`encode`
    writes are built, a dataclass or named tuple only when its type is registered with :func:`keep`
    (:data:`KEPT`), arrays only of the dtypes it writes and of the size the file's own data
    has, and nothing nested deeper than :data:`MAX_DEPTH`. Anything else raises :class:`EvidenceError`
    naming the kind; nothing a file names is ever imported or called but those classes."""
    import numpy as np

    if _depth > MAX_DEPTH:
        raise EvidenceError(f"evidence nested more than {MAX_DEPTH} deep")
    inner = _depth + 1
    if isinstance(data, list):
        return [decode(v, _depth=inner) for v in data]
    if not isinstance(data, dict):
        return data
    kind = data.get(TAG)
    if kind is None:
        return {k: decode(v, _depth=inner) for k, v in data.items()}
    try:
        if kind == "float":
            return float(_str(data["value"], "a float"))
        if kind == "npscalar":
            dtype = _dtype(data["dtype"], "biufcmMUS")
            if "array" in data:
                arr = decode(data["array"], _depth=inner)
                if not (isinstance(arr, np.ndarray) and arr.shape == (1,) and arr.dtype == dtype):
                    raise EvidenceError(f"a numpy scalar's array is not one {dtype}")
                return arr[0]
            value = decode(data["value"], _depth=inner)
            if not isinstance(value, (bool, int, float, str)):
                raise EvidenceError(f"a numpy scalar holds a {type(value).__name__}")
            return dtype.type(value)
        if kind == "ndarray" and "base64" in data:
            import base64

            dtype = _dtype(data["dtype"], "biufcmM")
            text = _str(data["base64"], "an array's bytes")
            if len(text) * 3 // 4 > MAX_BYTES + 3:
                raise EvidenceError(f"evidence holds an array over {MAX_BYTES} bytes")
            raw = base64.b64decode(text, validate=True)
            if len(raw) % dtype.itemsize:
                raise EvidenceError(f"an array's {len(raw)} bytes are not whole items of {dtype}")
            shape = _shape(data["shape"], len(raw) // dtype.itemsize, dtype.itemsize)
            return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
        if kind == "ndarray":
            items = data["items"]
            if not isinstance(items, list):
                raise EvidenceError("an array's items are not a list")
            if data["dtype"] == "object":
                shape = _shape(data["shape"], len(items), 8)
                arr = np.empty(len(items), dtype=object)
                for i, v in enumerate(items):  # one by one: numpy would probe a sequence-like item
                    arr[i] = decode(v, _depth=inner)
                return arr.reshape(shape)
            dtype = _dtype(data["dtype"], "biufcmM")
            shape = _shape(data["shape"], len(items), dtype.itemsize)
            items = [decode(x, _depth=inner) for x in items]
            if not all(isinstance(x, (bool, int, float)) or dtype.kind == "c" and isinstance(x, list) for x in items):
                raise EvidenceError(f"an array of {dtype} holds an item that is not a number")
            if dtype.kind in "mM":
                return np.array(items, dtype=np.int64).view(dtype).reshape(shape)
            if dtype.kind == "c":
                return np.array([complex(re_, im) for re_, im in items], dtype=dtype).reshape(shape)
            return np.array(items, dtype=dtype).reshape(shape)
        if kind == "dict":
            return {_hashable(decode(k, _depth=inner)): decode(v, _depth=inner) for k, v in data["items"]}
        if kind == "tuple":
            return tuple(decode(v, _depth=inner) for v in data["items"])
        if kind == "set":
            return {_hashable(decode(v, _depth=inner)) for v in data["items"]}
        if kind == "frozenset":
            return frozenset(_hashable(decode(v, _depth=inner)) for v in data["items"])
        if kind == "path":
            from pathlib import Path

            return Path(_str(data["value"], "a path"))
        if kind == "namedtuple":
            cls = _kept(data["type"], kind)
            items = data["items"]
            if not (isinstance(items, list) and len(items) == len(cls._fields)):
                raise EvidenceError(f"{data['type']}: {len(cls._fields)} fields, the evidence gives "
                                    f"{len(items) if isinstance(items, list) else 'no list'}")
            return cls(*[decode(v, _depth=inner) for v in items])
        if kind == "dataclass":
            cls = _kept(data["type"], kind)
            fields = data["fields"]
            known = {f.name for f in dataclasses.fields(cls) if f.init}
            if not (isinstance(fields, dict) and set(fields) <= known):
                raise EvidenceError(f"{data['type']}: the evidence gives fields it does not have")
            return cls(**{k: decode(v, _depth=inner) for k, v in fields.items()})
        if kind == "DataFrame":
            import pandas as pd

            columns = decode(data["columns"], _depth=inner)
            index = _index(decode(data["index"], _depth=inner), decode(data["index_names"], _depth=inner))
            cols = {i: _column(decode(data["data"][str(i)], _depth=inner), len(index)) for i in range(len(columns))}
            df = pd.DataFrame({i: cols[i] for i in range(len(columns))}, index=index)
            names = decode(data["columns_names"], _depth=inner)
            df.columns = (pd.MultiIndex.from_tuples([tuple(c) for c in columns], names=names) if len(names) > 1
                          else pd.Index(columns, name=names[0] if names else None))
            return df
        if kind == "Series":
            import pandas as pd

            index = _index(decode(data["index"], _depth=inner), decode(data["index_names"], _depth=inner))
            return pd.Series(_column(decode(data["values"], _depth=inner), len(index)), index=index,
                             name=decode(data["name"], _depth=inner))
        if kind == "tensor":
            import torch

            arr = decode(data["array"], _depth=inner)
            if not (isinstance(arr, np.ndarray) and arr.dtype.kind in "biufc"):
                raise EvidenceError("a tensor's evidence is not a numeric array")
            return torch.from_numpy(np.ascontiguousarray(arr))
        if kind == "omitted":
            return Omitted(_str(data["type"], "a type name"), _str(data["where"], "a place"))
    except EvidenceError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, ImportError, IndexError, OverflowError,
            RecursionError, MemoryError) as exc:
        raise EvidenceError(f"malformed evidence of kind {str(kind)[:40]!r}: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from exc
    raise EvidenceError(f"unknown evidence kind {str(kind)[:40]!r}")


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
