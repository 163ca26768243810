"""Notebook parameters and run profiles, declared once per paper and validated before any work.

Each paper module declares a :class:`ParamSpec`: the parameters (name, type, range or choices,
help) and its profiles. ``book`` is the complete default set (what the rendered book runs);
``smoke`` (tests, seconds to a few minutes) and ``paper`` (closer to the paper's scale, for
machines with time or a GPU) override some of its values.

The notebook's first code cell (tagged ``parameters``) declares ``profile`` and every parameter
with default ``None`` ("take the profile's value"), so papermill can pass either a profile or
single values. :meth:`ParamSpec.from_namespace` resolves and validates them; a bad value raises
:class:`ParamError` whose message names the parameter.

Validate once, completely, up front: a spec carries every constraint its study and notebook
enforce on a value, so :meth:`ParamSpec.resolve` (hence ``acl26 run``, ``acl26.runner.resolve``
and the notebook's first cell) refuses what the study would refuse, before any work, in one line
``<paper>: parameter '<name>': ... <value>``. Each value is checked on its own by its
:class:`Param` (numbers by :mod:`acl26.checks`, the package's one checker), then the constraints
between parameters, :attr:`ParamSpec.checks`, in order. The study keeps its own checks too
(defence in depth); the spec just refuses first.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acl26 import checks

PROFILES = ("smoke", "book", "paper")
#: the types of a scalar parameter (and of a list's items)
_TYPES = (int, float, str, bool)


class ParamError(ValueError):
    """A parameter or profile is unknown or has a bad value."""


@dataclass(frozen=True)
class Param:
    """One notebook parameter: its type and every constraint a value must meet, declared once.

    The type is ``int``, ``float``, ``str``, ``bool`` or ``list`` (of ``elem``). Numbers are checked
    by :mod:`acl26.checks`, the package's one checker, with its rules: no silent truncation (an
    ``int`` parameter refuses ``2.9`` and ``2.0``), bool is not a number, numpy scalars of any
    width are accepted (the resolved value is a plain ``int`` / ``float`` / ``bool``), and a
    ``float`` refuses NaN and ±inf unless ``allow_nonfinite`` (only where the help text says what
    they mean). ``choices``, ``min`` / ``max`` (``min_open`` / ``max_open``: the bound itself is
    excluded; ``float`` only) and ``rule`` apply to the value, or to each item of a list;
    ``min_len`` / ``max_len`` to a list's length, and a list never repeats an item.
    ``rule`` is ``(what a value must be, predicate)``, e.g. ``("must be '' or a local folder",
    fn)``: the message then reads ``<paper>: parameter '<name>': must be ..., got <value>``.
    Constraints between parameters are :attr:`ParamSpec.checks`.
    """

    name: str
    type: type  # int, float, str, bool or list
    help: str
    elem: type | None = None  # element type of a list (default str)
    choices: tuple | None = None  # allowed values (of the value, or of each element of a list)
    min: float | None = None
    max: float | None = None
    min_len: int = 1  # lists: minimum length
    max_len: int | None = None  # lists: maximum length
    min_open: bool = False  # float: the value must be > min (not >=)
    max_open: bool = False  # float: the value must be < max (not <=)
    allow_nonfinite: bool = False  # float: NaN and ±inf pass (±inf still meets the bounds)
    rule: tuple[str, Callable[[Any], bool]] | None = None  # (what a value must be, predicate of one value)
    #: str: the value is a local path, made absolute (``~`` expanded) against the caller's working
    #: folder, so the notebook (which runs in ``notebooks/``) reads the folder the user named;
    #: ``''`` and the names in ``path_keep`` (e.g. a built-in teacher) stay as they are
    path: bool = False
    path_keep: tuple[str, ...] = ()

    def __post_init__(self):
        kind = (self.elem or str) if self.type is list else self.type
        if self.type not in _TYPES + (list,) or kind not in _TYPES:
            raise TypeError(f"Param {self.name!r}: type must be one of int, float, str, bool or list "
                            f"(of int, float, str or bool), got {self.type!r} / {self.elem!r}")
        if self.elem is not None and self.type is not list:
            raise TypeError(f"Param {self.name!r}: elem is for lists only")
        numeric = kind in (int, float)
        if (self.min is not None or self.max is not None) and not numeric:
            raise TypeError(f"Param {self.name!r}: min / max are for numbers only")
        if kind is int and any(b is not None and not (isinstance(b, int) and not isinstance(b, bool))
                               for b in (self.min, self.max)):
            raise TypeError(f"Param {self.name!r}: the bounds of an int parameter must be ints")
        if (self.min_open and self.min is None) or (self.max_open and self.max is None):
            raise ValueError(f"Param {self.name!r}: min_open / max_open need min / max")
        if (self.min_open or self.max_open or self.allow_nonfinite) and kind is not float:
            raise TypeError(f"Param {self.name!r}: min_open, max_open and allow_nonfinite are for floats only "
                            "(an int bound is exclusive by adding one)")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"Param {self.name!r}: min {self.min} exceeds max {self.max}")
        if self.type is list and (self.min_len < 0 or (self.max_len is not None and self.max_len < self.min_len)):
            raise ValueError(f"Param {self.name!r}: need 0 <= min_len <= max_len")
        if (self.path or self.path_keep) and kind is not str:
            raise TypeError(f"Param {self.name!r}: path is for str parameters only")
        if self.rule is not None and not (isinstance(self.rule, tuple) and len(self.rule) == 2
                                          and isinstance(self.rule[0], str) and callable(self.rule[1])):
            raise TypeError(f"Param {self.name!r}: rule must be (message, predicate)")

    def check(self, value: Any, paper: str) -> Any:
        """Return ``value`` validated, as plain Python values (int widened to float where a float is
        expected, numpy scalars unwrapped); raise :class:`ParamError` naming the parameter."""
        where = f"{paper}: parameter {self.name!r}"
        if self.type is not list:
            return self._scalar(value, self.type, where)
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ParamError(f"{where}: expected a list, got {value!r} ({type(value).__name__})")
        if len(value) < self.min_len:
            raise ParamError(f"{where}: expected at least {self.min_len} item(s), got {len(value)}: {list(value)!r}")
        if self.max_len is not None and len(value) > self.max_len:
            raise ParamError(f"{where}: expected at most {self.max_len} item(s), got {len(value)}: {list(value)!r}")
        out = [self._scalar(v, self.elem or str, f"{where}: item {i}") for i, v in enumerate(value)]
        if len({(type(v), "nan" if v != v else v) for v in out}) != len(out):  # 0.0 repeats -0.0; NaN repeats NaN
            raise ParamError(f"{where}: duplicate items in {out!r}")
        return out

    def _scalar(self, value: Any, typ: type, where: str) -> Any:
        if typ is bool:
            if not checks.is_bool(value):
                raise ParamError(f"{where}: expected true or false, got {value!r} ({type(value).__name__})")
            v = bool(value)
        elif typ is str:
            if not isinstance(value, str):
                raise ParamError(f"{where}: expected str, got {value!r} ({type(value).__name__})")
            v = str(value)
            if self.path and v and v not in self.path_keep:
                v = str(Path(v).expanduser().absolute())
        elif typ is int:
            try:
                v = checks.integer(self.name, value)
            except (ValueError, TypeError):
                raise ParamError(f"{where}: expected int, got {value!r} ({type(value).__name__})") from None
        else:
            try:
                v = checks.number(self.name, value, allow_nonfinite=self.allow_nonfinite)
            except (ValueError, TypeError):
                if checks.is_number(value):
                    raise ParamError(f"{where}: expected a finite number, got {value!r}") from None
                raise ParamError(f"{where}: expected float, got {value!r} ({type(value).__name__})") from None
        if self.choices is not None and v not in self.choices:
            raise ParamError(f"{where}: {v!r} is not one of {', '.join(map(str, self.choices))}")
        if typ in (int, float):
            self._bounds(v, where)
        if self.rule is not None and not self.rule[1](v):
            raise ParamError(f"{where}: {self.rule[0]}, got {v!r}")
        return v

    def _bounds(self, v: int | float, where: str) -> None:
        """The bounds, on a value whose type :meth:`_scalar` already checked (NaN meets every bound; ±inf only
        those it lies within)."""
        if self.min is not None and (v < self.min or (self.min_open and v == self.min)):
            edge = "at or below the exclusive minimum" if self.min_open else "below the minimum"
            raise ParamError(f"{where}: {v!r} is {edge} {self.min}")
        if self.max is not None and (v > self.max or (self.max_open and v == self.max)):
            edge = "at or above the exclusive maximum" if self.max_open else "above the maximum"
            raise ParamError(f"{where}: {v!r} is {edge} {self.max}")

    @property
    def annotation(self) -> str:
        inner = "list" if self.type is list else self.type.__name__
        return f"Optional[{inner}]"


@dataclass
class ParamSpec:
    paper: str
    params: tuple[Param, ...]
    profiles: dict[str, dict[str, Any]]
    #: cross-parameter checks, in order: (message, predicate over the resolved dict, each value already
    #: valid on its own); the message names the parameters, and the error adds their values
    checks: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = field(default_factory=tuple)

    def __post_init__(self):
        if set(self.profiles) != set(PROFILES):
            raise ValueError(f"{self.paper}: profiles must be exactly {PROFILES}, got {sorted(self.profiles)}")
        book = self.profiles["book"]
        missing = [p.name for p in self.params if p.name not in book]
        if missing:
            raise ValueError(f"{self.paper}: the book profile lacks {missing}")
        for prof, values in self.profiles.items():
            unknown = set(values) - set(self.names)
            if unknown:
                raise ValueError(f"{self.paper}: profile {prof!r} sets unknown parameters {sorted(unknown)}")
        for prof in PROFILES:  # every profile must itself be valid
            self.resolve(prof)

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise ParamError(f"{self.paper}: unknown parameter {name!r}; known: {', '.join(self.names)}")

    def check_profile(self, profile: str) -> str:
        """``profile`` if it is one of :data:`PROFILES` (each already valid: checked when the spec was made);
        ParamError otherwise."""
        if profile not in PROFILES:
            raise ParamError(f"{self.paper}: unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
        return profile

    def resolve(self, profile: str = "book", overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The full, validated parameter set of ``profile`` with ``overrides`` applied."""
        self.check_profile(profile)
        values = {**self.profiles["book"], **self.profiles[profile]}
        for name, value in (overrides or {}).items():
            self.param(name)  # raises for unknown names
            values[name] = value
        out = {"profile": profile}
        for p in self.params:
            out[p.name] = p.check(values[p.name], self.paper)
        for message, predicate in self.checks:
            if not predicate(out):
                named = [n for n in self.names if re.search(rf"(?<!\w){re.escape(n)}(?!\w)", message)]
                shown = f" (got {', '.join(f'{n}={out[n]!r}' for n in named)})" if named else ""
                raise ParamError(f"{self.paper}: {message}{shown}")
        return out

    def from_namespace(self, namespace: Mapping[str, Any]) -> dict[str, Any]:
        """Resolve the parameters a notebook holds in ``namespace`` (None means the profile's value)."""
        profile = namespace.get("profile", "book")
        overrides = {n: namespace[n] for n in self.names if namespace.get(n) is not None}
        return self.resolve(profile, overrides)

    def notebook_cell(self) -> str:
        """The canonical text of the notebook's ``parameters`` cell (written by ``acl26 sync``).

        It names every parameter with its help text, which ``papermill --help-notebook`` shows, and
        no profile values: those live in the spec alone, so changing a profile changes no notebook.
        """
        lines = [
            "from typing import Optional",
            "",
            "# Parameters (papermill). `profile` picks a set of values from acl26; any parameter left at",
            "# None takes the profile's value. `acl26 list` shows every profile's values.",
            'profile: str = "book"  # smoke | book | paper',
        ]
        for p in self.params:
            lines.append(f"{p.name}: {p.annotation} = None  # {_help(p.help)}")
        return "\n".join(lines)


def _help(text: str) -> str:
    return text.replace("=", ":")  # papermill's cell parser dislikes '=' in help comments


def parse_cli_value(text: str) -> Any:
    """``-p name=value`` values: a Python literal if it parses as one, else the raw string.

    ``true`` / ``false`` are bools, and ``nan``, ``inf``, ``-inf`` (any case) floats, so that the
    parameter's own check decides: a float parameter refuses them, unless it allows non-finite values.
    """
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        if lowered in _NONFINITE:
            return float(lowered)
        return text


_NONFINITE = ("nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity")


def _device_here(device: str) -> bool:
    if not device.startswith("cuda"):
        return True
    import torch

    return torch.cuda.is_available()


#: a :attr:`Param.rule` for a torch device parameter: ``cuda`` only where torch sees a CUDA device
TORCH_DEVICE = ("must be a device torch can use here ('cuda' needs a CUDA device that torch sees)", _device_here)


def folder_with(*files: str, empty: bool = True) -> tuple[str, Callable[[str], bool]]:
    """A :attr:`Param.rule`: a local folder holding every one of ``files`` (or ``''`` where ``empty``)."""
    what = ("must be '' or " if empty else "must be ") + f"a local folder with {' and '.join(files)}"
    return what, lambda v: (empty and v == "") or (v != "" and all((Path(v) / f).is_file() for f in files))


def parse_assignments(items: list[str] | None) -> dict[str, Any]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ParamError(f"parameter {item!r}: expected name=value")
        out[name.strip()] = parse_cli_value(value)
    return out
