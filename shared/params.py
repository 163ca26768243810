"""Notebook parameters and run profiles, declared once per paper and validated before any work.

Each paper module declares a :class:`ParamSpec`: the parameters (name, type, range or choices,
help) and its profiles. ``book`` is the complete default set (what the rendered book runs);
``smoke`` (tests, seconds to a few minutes) and ``paper`` (closer to the paper's scale, for
machines with time or a GPU) override some of its values.

The notebook's first code cell (tagged ``parameters``) declares ``profile`` and every parameter
with default ``None`` ("take the profile's value"), so papermill can pass either a profile or
single values. :meth:`ParamSpec.from_namespace` resolves and validates them; a bad value raises
:class:`ParamError` whose message names the parameter.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROFILES = ("smoke", "book", "paper")


class ParamError(ValueError):
    """A parameter or profile is unknown or has a bad value."""


@dataclass(frozen=True)
class Param:
    name: str
    type: type  # int, float, str, bool or list
    help: str
    elem: type | None = None  # element type of a list
    choices: tuple | None = None  # allowed values (of the value, or of each element of a list)
    min: float | None = None
    max: float | None = None
    min_len: int = 1  # lists: minimum length

    def check(self, value: Any, paper: str) -> Any:
        """Return ``value`` validated (and int widened to float where a float is expected)."""
        where = f"{paper}: parameter {self.name!r}"
        if self.type is list:
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, (list, tuple)):
                raise ParamError(f"{where}: expected a list, got {value!r}")
            value = [self._scalar(v, self.elem or str, where) for v in value]
            if len(value) < self.min_len:
                raise ParamError(f"{where}: expected at least {self.min_len} item(s), got {len(value)}")
            if len(set(map(repr, value))) != len(value):
                raise ParamError(f"{where}: duplicate items in {value!r}")
            return value
        return self._scalar(value, self.type, where)

    def _scalar(self, value: Any, typ: type, where: str) -> Any:
        if typ is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if typ is bool:
            if not isinstance(value, bool):
                raise ParamError(f"{where}: expected true or false, got {value!r}")
        elif not isinstance(value, typ) or isinstance(value, bool):
            raise ParamError(f"{where}: expected {typ.__name__}, got {value!r} ({type(value).__name__})")
        if typ is float and value != value:
            raise ParamError(f"{where}: expected a number, got NaN")
        if self.choices is not None and value not in self.choices:
            raise ParamError(f"{where}: {value!r} is not one of {', '.join(map(str, self.choices))}")
        if self.min is not None and value < self.min:
            raise ParamError(f"{where}: {value!r} is below the minimum {self.min}")
        if self.max is not None and value > self.max:
            raise ParamError(f"{where}: {value!r} is above the maximum {self.max}")
        return value

    @property
    def annotation(self) -> str:
        inner = f"list" if self.type is list else self.type.__name__
        return f"Optional[{inner}]"


@dataclass
class ParamSpec:
    paper: str
    params: tuple[Param, ...]
    profiles: dict[str, dict[str, Any]]
    #: cross-parameter checks: (message, predicate over the resolved dict)
    checks: tuple[tuple[str, Any], ...] = field(default_factory=tuple)

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

    def resolve(self, profile: str = "book", overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The full, validated parameter set of ``profile`` with ``overrides`` applied."""
        if profile not in PROFILES:
            raise ParamError(f"{self.paper}: unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
        values = {**self.profiles["book"], **self.profiles[profile]}
        for name, value in (overrides or {}).items():
            self.param(name)  # raises for unknown names
            values[name] = value
        out = {"profile": profile}
        for p in self.params:
            out[p.name] = p.check(values[p.name], self.paper)
        for message, predicate in self.checks:
            if not predicate(out):
                raise ParamError(f"{self.paper}: {message}")
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
    """``-p name=value`` values: a Python literal if it parses as one, else the raw string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return text


def parse_assignments(items: list[str] | None) -> dict[str, Any]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ParamError(f"parameter {item!r}: expected name=value")
        out[name.strip()] = parse_cli_value(value)
    return out
