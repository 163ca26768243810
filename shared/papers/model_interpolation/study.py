"""Model-interpolation chapter (ACL 2026, arXiv 2510.10977): parameters, claims, the sweep, verdicts.

Backs ``notebooks/model_interpolation.ipynb``. The merge is :mod:`.merge`, the pair :mod:`.pair`,
the generation loop :mod:`.rollout`. Here: the pair (made here or any local checkpoints,
:func:`load_pair`), one evaluated configuration (:func:`evaluate`: k rollouts of every problem
under one merged model and one decoding, cached), the λ sweep with its fine grid in the
transition band (:func:`sweep`), the baselines and ablations (:func:`variants`), the stage bands
(:func:`band`) and :func:`record_claims`, which decides every verdict on intervals over problems.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from acl26 import claims as C
from acl26 import checks, evaluation, io, models, paths, problems, stats
from acl26.papers.model_interpolation import merge as M
from acl26.papers.model_interpolation import pair as pair_mod
from acl26.papers.model_interpolation import rollout as R
from acl26.checks import SEED_MAX
from acl26.params import TORCH_DEVICE, Param, ParamSpec, folder_with

#: the paper's Table 2 (Qwen3-4B, AIME'25): Mean@64, Pass@64, tokens, Think %
PAPER_TABLE2 = {
    "Instruct": (46.6, 76.7, 15097, 0.0), "Thinking": (80.4, 90.0, 22813, 99.9),
    "TA": (61.7, 86.7, 16594, 0.5), "TIES": (61.5, 93.3, 11159, 65.4),
    "MI-0.4": (55.8, 90.0, 12448, 1.4), "MI-0.5": (62.5, 90.0, 11189, 59.6),
    "MI-0.6": (71.0, 90.0, 12681, 100.0), "MI-0.8": (80.5, 93.3, 17574, 99.9),
}
#: Think #R thresholds that delimit the transition band (stage 2)
BAND_LOW, BAND_HIGH = 0.1, 0.9


def _local(p: dict, *files: str) -> bool:
    """The local pair's folders (if given) hold ``files`` (glob patterns: one match each)."""
    return not p["instruct"] or all(any(Path(p[end]).glob(f)) for end in ("instruct", "thinking") for f in files)


def _finetune_rows(p: dict) -> int:
    """The most rows the pair's fine-tunes can train on: pair.fine_tune holds out max(8, n // 20) of the
    ``train_problems`` (fewer rows if the length filter or gsm_symbolic drop some)."""
    return p["train_problems"] - max(8, p["train_problems"] // 20)

SPEC = ParamSpec(
    paper="model_interpolation",
    params=(
        Param("parent", str, "parent of the pair made here: SmolLM2-135M-Instruct or a tiny LM", choices=("smollm2", "tiny")),
        Param("instruct", str, "local HF folder of an Instruct checkpoint ('' = the pair made here)", path=True),
        Param("thinking", str, "local HF folder of its Thinking sibling ('' = the pair made here)", path=True),
        Param("base", str, "local HF folder of their shared base, for TA and TIES ('' = the parent of the pair made "
              "here; with a local pair and no base, TA and TIES are not run)", rule=folder_with("config.json"),
              path=True),
        Param("merge", str, "how each merged model is made: 'memory' (interpolate on state dicts, 3 model-sizes) or "
              "'streamed' (interpolate_files over the two checkpoints on disk, near one model-size; for paper-scale pairs)",
              choices=("memory", "streamed")),
        Param("device", str, "torch device for generation", choices=("cpu", "cuda"), rule=TORCH_DEVICE),
        Param("dtype", str, "weights' dtype in generation", choices=("float32", "bfloat16")),
        Param("train_problems", int, "problems drawn for fine-tuning the pair (before the length filter)", min=16),
        Param("max_terms", int, "chain sums: most terms (steps = terms - 1)", min=2, max=8),
        Param("gsm_share", float, "share of gsm_symbolic problems (training half of the GSM8K templates)", min=0.0, max=1.0),
        Param("check_share", float, "share of Thinking traces with a checking pass", min=0.0, max=1.0),
        Param("max_len", int, "fine-tuning: longest prompt + response (tokens)", min=16),
        Param("steps_instruct", int, "fine-tuning steps of Instruct", min=1),
        Param("steps_thinking", int, "fine-tuning steps of Thinking", min=1),
        Param("ft_batch", int, "fine-tuning batch (examples)", min=1),
        Param("ft_lr", float, "fine-tuning peak learning rate", min=1e-7, max=1.0),
        Param("seed", int, "seed of the data, the fine-tunes and the rollouts", min=0, max=SEED_MAX),
        Param("eval_problems", int, "held-out chain-sum problems per configuration", min=2),
        Param("k", int, "rollouts per problem (Mean@k, Pass@k, Vote@k)", min=1),
        Param("max_new_tokens", int, "longest response (tokens)", min=1),
        Param("batch_prompts", int, "prompts per generation batch (each with k rollouts)", min=1),
        Param("lambdas", list, "coarse λ grid", elem=float, min_len=2, min=0.0, max=1.0),
        Param("fine_points", int, "extra λ values in the transition band (where Think #R crosses 1/2)", min=0),
        Param("best_lambda", float, "the λ < 1 compared with Thinking and the baselines (fixed before the run: the "
              "paper's MI-0.8)", min=0.0, max=1.0, max_open=True),
        Param("ablation_lambda", float, "λ of the layer and module ablations the verdicts use (paper: 0.8)", min=0.0, max=1.0),
        Param("extra_ablation_lambdas", list, "further λ values of the same ablations, shown apart (no verdict uses them)",
              elem=float, min_len=0, min=0.0, max=1.0),
        Param("grid_temperatures", list, "decoding grid at the band's λ: temperatures", elem=float, min_len=1,
              min=0.0, min_open=True),
        Param("grid_top_ps", list, "decoding grid at the band's λ: top-p values", elem=float, min_len=1,
              min=0.0, min_open=True, max=1.0),
        Param("gsm8k_split", str, "real GSM8K questions evaluated at λ = 0, best_lambda, 1 ('none': skip)",
              choices=("heldout", "all", "none")),
        Param("gsm8k_max_new_tokens", int, "longest GSM8K response (tokens)", min=1),
        Param("ta_scale", float, "Task Arithmetic: scale of both task vectors", min=0.0),
        Param("ties_density", float, "TIES: share of each task vector kept", min=0.01, max=1.0),
        Param("ties_scale", float, "TIES: scale of the merged task vector", min=0.0),
        Param("n_resamples", int, "bootstrap resamples of every interval", min=99),
    ),
    profiles={
        "book": dict(parent="smollm2", instruct="", thinking="", base="", merge="memory", device="cpu", dtype="float32",
                     train_problems=1200, max_terms=5, gsm_share=0.15, check_share=0.4, max_len=144,
                     steps_instruct=32, steps_thinking=32, ft_batch=16, ft_lr=3e-4, seed=0,
                     eval_problems=24, k=4, max_new_tokens=128, batch_prompts=24,
                     lambdas=[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], fine_points=2,
                     best_lambda=0.8, ablation_lambda=0.8, extra_ablation_lambdas=[1.0], grid_temperatures=[0.6, 1.0], grid_top_ps=[0.8, 0.95],
                     gsm8k_split="heldout", gsm8k_max_new_tokens=160, ta_scale=0.7, ties_density=0.2, ties_scale=0.5,
                     n_resamples=1999),
        "smoke": dict(parent="tiny", train_problems=64, steps_instruct=4, steps_thinking=4, ft_batch=4,
                      eval_problems=4, k=2, max_new_tokens=12, batch_prompts=4, lambdas=[0.0, 0.5, 0.8, 1.0], fine_points=1,
                      grid_temperatures=[0.6], grid_top_ps=[0.95, 0.8], gsm8k_split="none", n_resamples=199),
        "paper": dict(eval_problems=100, k=16, max_new_tokens=256, fine_points=4, gsm8k_split="all",
                      steps_instruct=96, steps_thinking=96, n_resamples=4999),
    },
    checks=(
        # the sweep's ends are the two models (the checks, the Thinking comparisons and the notebook read λ = 0, 1)
        ("lambdas must include 0 and 1", lambda p: 0.0 in p["lambdas"] and 1.0 in p["lambdas"]),
        ("best_lambda must be one of lambdas", lambda p: p["best_lambda"] in p["lambdas"]),
        ("instruct and thinking must both be given or both be ''", lambda p: bool(p["instruct"]) == bool(p["thinking"])),
        # load_pair: models.load_local needs config.json, and one of the two folders a tokenizer
        ("instruct and thinking must be local Hugging Face folders (with config.json)", lambda p: _local(p, "config.json")),
        ("instruct or thinking must hold a tokenizer (tokenizer_config.json)",
         lambda p: not p["instruct"] or any((Path(p[e]) / "tokenizer_config.json").is_file() for e in ("instruct", "thinking"))),
        # merged(): the streamed merge reads the checkpoints' safetensors files
        ("merge 'streamed' needs *.safetensors in instruct and thinking",
         lambda p: p["merge"] != "streamed" or _local(p, "*.safetensors")),
        # training.train refuses a batch larger than the training rows
        ("ft_batch must not exceed the pair's fine-tuning rows: train_problems less the max(8, train_problems // 20) "
         "held out", lambda p: bool(p["instruct"]) or p["ft_batch"] <= _finetune_rows(p)),
    ),
)

CLAIMS = [
    C.Claim("think_sigmoid", "Think #R rises like a sigmoid in λ: ≈ 0 below a narrow band, ≈ 1 above it",
            "0 → 1 within λ ∈ [0.4, 0.6]", "§ three stages (Qwen3-4B)",
            C.predicate("ours: λ-width of the band where Think #R goes from ≤ 10% to ≥ 90% is ≤ 0.4",
                        lambda v: v <= 0.4)),
    C.Claim("mean_jumps", "Across that band Mean@k jumps more than Pass@k",
            "Mean@64 55.8 → 71.0, Pass@64 90.0 → 90.0 (λ 0.4 → 0.6)", "Table 2 (AIME'25)",
            C.predicate("ours: ΔMean@k − ΔPass@k across the band > 0", lambda v: v > 0)),
    C.Claim("length_grows", "Past the band, responses keep getting longer (over-thinking)",
            "tokens 12,681 (λ 0.6) → 17,574 (0.8) → 22,813 (Thinking)", "Table 2",
            C.predicate("ours: Token #N at λ = 1 / at the band's end > 1", lambda v: v > 1)),
    C.Claim("matches_thinking", "A λ < 1 reaches the Thinking model's accuracy", "MI-0.8 80.5 vs Thinking 80.4 (Mean@64)",
            "Table 2", C.predicate("ours: Mean@k(best_lambda) − Mean@k(Thinking) ≥ −0.05 (non-inferior by 5 points)",
                                   lambda v: v >= -0.05)),
    C.Claim("fewer_tokens", "… at fewer tokens", "17,574 vs 22,813 tokens (0.77×)", "Table 2",
            C.predicate("ours: Token #N(best_lambda) / Token #N(Thinking) < 1", lambda v: v < 1)),
    C.Claim("beats_merging", "Interpolation beats Task Arithmetic and TIES", "MI-0.8 80.5 vs TA 61.7, TIES 61.5 (Mean@64)",
            "Table 2", C.predicate("ours: Mean@k(best_lambda) − the better of TA and TIES > 0", lambda v: v > 0)),
    C.Claim("mlp_drives", "The MLPs carry the thinking behaviour more than attention does",
            "λ = 0.8, MLPs left at Instruct: Think 0.7%; attention left at Instruct: 99.9%", "module ablation",
            C.predicate("ours: Think #R(MLP only) − Think #R(attention only) > 0", lambda v: v > 0)),
    C.Claim("late_layers", "Interpolating the later two thirds of the layers gives thinking; the first third does not",
            "λ = 0.8: layers [0, 11] Think 0%, [12, 35] Think 100%", "layer ablation",
            C.predicate("ours: Think #R(last two thirds) − Think #R(first third) > 0", lambda v: v > 0)),
    C.Claim("decoding_robust", "In the band, accuracy barely moves across temperature × top-p",
            "IFEval 69.7–71.3 at λ = 0.4", "decoding ablation",
            C.predicate("ours: max − min Mean@k over the grid ≤ 0.05", lambda v: v <= 0.05)),
    C.Claim("thinking_thinks", "The Thinking model made here thinks", "—", "ours",
            C.predicate("Think #R(λ = 1) ≥ 0.9", lambda v: v >= 0.9), kind="check"),
    C.Claim("thinking_better", "The Thinking model answers better than Instruct", "—", "ours",
            C.predicate("Mean@k(Thinking) − Mean@k(Instruct) > 0", lambda v: v > 0), kind="check"),
    C.Claim("endpoints_exact", "λ = 0 and λ = 1 give the two models bit for bit", "—", "ours",
            C.predicate("max |difference| = 0", lambda v: v == 0), kind="check"),
    C.Claim("pair_close", "The pair is close in weight space (the paper's 4B pair: σ = 0.0269)", "—", "ours",
            C.predicate("σ (mean over tensors) < 0.1", lambda v: v < 0.1), kind="check"),
]


# --------------------------------------------------------------------------------------------
# the pair


def _dtype(params: dict) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16}[params["dtype"]]


def load_pair(params: dict, progress: bool = True) -> dict:
    """The two ends and their base: ``model`` (a working copy to load merges into), ``tokenizer``,
    ``instruct`` / ``thinking`` / ``base`` state dicts (``base`` None when there is none), ``source``
    and, for the pair made here, the two training logs."""
    dtype = _dtype(params)
    if params["instruct"]:
        model, tok = models.load_local(params["instruct"], dtype=dtype)
        thinking_model, tok_t = models.load_local(params["thinking"], dtype=dtype)
        if tok is None:
            tok = tok_t
        if tok is None:
            raise ValueError("instruct: neither checkpoint folder has a tokenizer")
        base = models.load_local(params["base"], dtype=dtype)[0].state_dict() if params["base"] else None
        out = {"source": f"local checkpoints: {params['instruct']} and {params['thinking']}",
               "instruct_dir": params["instruct"], "thinking_dir": params["thinking"], "logs": {}}
        thinking = {k: v.detach().clone() for k, v in thinking_model.state_dict().items()}
        del thinking_model
    else:
        runs = {s: pair_mod.fine_tune(s, params, progress=progress) for s in pair_mod.STYLES}
        parent, tok = pair_mod.parent(params["parent"])
        model = runs["instruct"].model.to(dtype)
        thinking = {k: v.detach().clone().to(dtype) for k, v in runs["thinking"].model.state_dict().items()}
        base = {k: v.detach().clone().to(dtype) for k, v in parent.state_dict().items()}
        out = {"source": f"made here from {params['parent']}", "logs": {s: r.log for s, r in runs.items()},
               "instruct_dir": str(runs["instruct"].folder), "thinking_dir": str(runs["thinking"].folder)}
    instruct = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}  # state dicts stay on the CPU
    model.to(params["device"]).eval()
    out.update(model=model, tokenizer=tok, instruct=instruct, thinking=thinking, base=base,
               n_layers=int(model.config.num_hidden_layers))
    return out


# --------------------------------------------------------------------------------------------
# one configuration: a merged model under one decoding


def decoding_for(lam: float | None, params: dict, *, temperature: float | None = None,
                 top_p: float | None = None) -> dict:
    """The paper's decoding: Instruct (λ = 0) at T 0.7, top-p 0.8; merged and Thinking at T 0.6, top-p 0.95;
    top-k 20 for all. ``temperature`` / ``top_p`` override (the decoding grid)."""
    base = dict(temperature=0.7, top_p=0.8, top_k=20) if lam == 0 else dict(temperature=0.6, top_p=0.95, top_k=20)
    if temperature is not None:
        base["temperature"] = float(temperature)
    if top_p is not None:
        base["top_p"] = float(top_p)
    return base


def merged(pair: dict, params: dict, lam: float, *, layers=None, modules=None) -> dict:
    """Θ(λ) as a state dict: in memory, or (``merge="streamed"``) written by :func:`.merge.interpolate_files`
    from the two checkpoint folders into a scratch folder and read back (the inputs never in memory at once)."""
    if params["merge"] == "memory":
        return M.interpolate(pair["instruct"], pair["thinking"], lam, layers=layers, modules=modules)
    from safetensors.torch import load_file

    scratch = paths.cache_dir() / "model_interpolation" / "streamed-merge"
    M.interpolate_files(pair["instruct_dir"], pair["thinking_dir"], scratch, lam, layers=layers, modules=modules)
    state = {}
    for f in sorted(scratch.glob("*.safetensors")):
        state.update(load_file(f))
    dtype = _dtype(params)
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}


def load_into(model, state: dict) -> None:
    """Load a merged state dict; a checkpoint on disk may omit tied weights (e.g. ``lm_head.weight``)."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected:
        raise ValueError(f"merged weights have tensors the model lacks: {unexpected[:3]}")
    params = dict(model.named_parameters(remove_duplicate=False))
    present = {params[k].data_ptr() for k in state if k in params}
    untied = [k for k in missing if k not in params or params[k].data_ptr() not in present]
    if untied:
        raise ValueError(f"merged weights lack tensors of the model: {untied[:3]}")


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def state_digest(sd: dict) -> str:
    """sha256 over every tensor's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for k in sorted(sd):
        t = sd[k].detach().cpu().contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def evaluate(pair: dict, state: dict | Callable[[], dict], label: str, items: Sequence[problems.Problem], decoding: dict, params: dict, *,
             max_new_tokens: int | None = None, k: int | None = None, cache_key: dict | None = None,
             progress: bool = False) -> dict:
    """k rollouts of every problem under the merged ``state``: per-problem correctness, tokens, thinking.

    ``state`` may be a function that makes it (called only on a cache miss; then ``cache_key`` is
    required). Cached under ``$ACL26_CACHE/model_interpolation/`` by the pair, the merge
    (``cache_key``), the problems, the decoding, k, the length limit, the seed, the prompts per batch
    (they set the sampling streams), the merge mode, the device and the dtype.
    """
    if callable(state) and cache_key is None:
        raise ValueError("a lazily made state needs a cache_key")
    k = params["k"] if k is None else k
    max_new = params["max_new_tokens"] if max_new_tokens is None else max_new_tokens
    key = _digest({"pair": pair["digest"], "merge": cache_key or state_digest(state), "problems": [p.id for p in items],
                   "questions": _digest([p.question for p in items]), "decoding": decoding, "k": k, "max_new": max_new,
                   "seed": params["seed"], "batch_prompts": params["batch_prompts"], "mode": params["merge"],
                   "device": params["device"], "dtype": params["dtype"], "v": 2})
    path = paths.cache_dir() / "model_interpolation" / f"{key}.json"
    if path.is_file():
        rec = io.read_cached_json(path, "cached rollout record")
        rec["label"] = label
        return rec
    model, tok = pair["model"], pair["tokenizer"]
    load_into(model, state() if callable(state) else state)
    prompts = [pair_mod.prompt_text(tok, p.question) for p in items]
    ro = R.rollouts(model, tok, prompts, k=k, max_new_tokens=max_new, seed=params["seed"],
                    batch_prompts=params["batch_prompts"], progress=progress, **decoding)
    correct = [[problems.is_correct(t, p.answer) for t in row] for row, p in zip(ro.texts, items)]
    think = [[evaluation.THINK_END in t for t in row] for row in ro.texts]
    answers = [[problems.extract_answer(t) for t in row] for row in ro.texts]
    rec = {"label": label, "decoding": decoding, "k": k, "correct": correct, "tokens": ro.n_tokens, "think": think,
           "answers": answers, "golds": [p.answer for p in items], "finished": ro.finished, "seconds": ro.seconds,
           "generated": ro.generated, "examples": [ro.texts[i][0] for i in range(min(3, len(items)))]}
    io.write_json(path, rec)
    return rec


def per_problem(rec: dict) -> dict[str, np.ndarray]:
    """Per-problem Mean@k, Pass@k (unbiased, from all samples), Think #R and mean tokens."""
    k = rec["k"]
    acc = np.array([np.mean(r[:k]) for r in rec["correct"]], dtype=float)
    pas = np.array([evaluation.pass_at_k(len(r), int(sum(r)), k) for r in rec["correct"]], dtype=float)
    think = np.array([np.mean(r) for r in rec["think"]], dtype=float)
    tokens = np.array([np.mean(r) for r in rec["tokens"]], dtype=float)
    return {"mean@k": acc, "pass@k": pas, "think": think, "tokens": tokens}


def summary(rec: dict) -> dict:
    """Mean@k, Pass@k, Vote@k, Token #N and Think #R of one configuration."""
    pp = per_problem(rec)
    vote = evaluation.vote_at_k(rec["answers"], rec["golds"], rec["k"])
    return {"mean@k": float(pp["mean@k"].mean()), "pass@k": float(pp["pass@k"].mean()), "vote@k": vote,
            "tokens": float(np.mean([x for r in rec["tokens"] for x in r])),
            "think": float(np.mean([x for r in rec["think"] for x in r])),
            "finished": float(np.mean([x for r in rec["finished"] for x in r]))}


# --------------------------------------------------------------------------------------------
# the sweep, the band, the variants


def band(lams: Sequence[float], think: Sequence[float], low: float = BAND_LOW, high: float = BAND_HIGH):
    """The transition band ``(lo, hi)``: ``hi`` the smallest λ with Think #R ≥ ``high``, ``lo`` the largest
    λ below it with Think #R ≤ ``low``; None when the curve never gets there."""
    order = np.argsort(lams)
    lam = np.asarray(lams, dtype=float)[order]
    rate = np.asarray(think, dtype=float)[order]
    above = np.nonzero(rate >= high)[0]
    if not len(above):
        return None
    hi = int(above[0])
    below = np.nonzero(rate[:hi] <= low)[0]
    if not len(below):
        return None
    return float(lam[int(below[-1])]), float(lam[hi])


def crossing(lam: np.ndarray, rate: np.ndarray, level: float) -> float:
    """The first λ where the piecewise-linear curve reaches ``level`` (inf if never)."""
    for i in range(len(lam)):
        if rate[i] >= level:
            if i == 0:
                return float(lam[0])
            x0, x1, y0, y1 = lam[i - 1], lam[i], rate[i - 1], rate[i]
            return float(x0 + (level - y0) * (x1 - x0) / (y1 - y0))
    return math.inf


#: the band width of a curve that never rises from ≤ 10% to ≥ 90%: wider than any λ range in [0, 1]
NEVER = 2.0


def band_width(lams: Sequence[float], think_matrix: np.ndarray) -> float:
    """λ-width from Think #R first reaching 10% to first reaching 90% (``think_matrix``: problems × λ).

    :data:`NEVER` when the curve never reaches 90%, or does not start at or below 10% (then it does
    not rise from ≈ 0)."""
    order = np.argsort(lams)
    lam = np.asarray(lams, dtype=float)[order]
    rate = np.asarray(think_matrix, dtype=float)[:, order].mean(axis=0)
    hi = crossing(lam, rate, BAND_HIGH)
    if math.isinf(hi) or rate[0] > BAND_LOW:
        return NEVER
    return hi - crossing(lam, rate, BAND_LOW)


def fine_grid(lams: Sequence[float], think: Sequence[float], n: int) -> list[float]:
    """``n`` evenly spaced λ values between the grid points where Think #R crosses 1/2 (none if it never does)."""
    n = checks.integer("n", n, 0)
    order = np.argsort(lams)
    lam = np.asarray(lams, dtype=float)[order]
    rate = np.asarray(think, dtype=float)[order]
    idx = np.nonzero(rate >= 0.5)[0]
    if n == 0 or not len(idx) or idx[0] == 0:
        return []
    a, b = lam[idx[0] - 1], lam[idx[0]]
    return [round(float(a + (b - a) * (i + 1) / (n + 1)), 4) for i in range(n)]


def label_of(lam: float) -> str:
    return f"MI-{lam:g}"


def sweep(pair: dict, items, params: dict, progress: bool = True) -> dict:
    """Every λ of the coarse grid, then ``fine_points`` more in the transition band: {λ: record}."""
    from tqdm import tqdm

    out = {}

    def run(lams):
        for lam in tqdm(lams, desc="λ sweep", disable=not progress):
            out[lam] = evaluate(pair, lambda lam=lam: merged(pair, params, lam), label_of(lam), items,
                                decoding_for(lam, params), params, cache_key={"lam": lam})

    run(sorted(set(float(x) for x in params["lambdas"])))
    lams = sorted(out)
    extra = [x for x in fine_grid(lams, [summary(out[x])["think"] for x in lams], params["fine_points"]) if x not in out]
    run(extra)
    return dict(sorted(out.items()))


def thirds(n_layers: int) -> dict[str, list[int]]:
    """The paper's layer ranges scaled to ``n_layers``: the first third and the last two thirds."""
    n_layers = checks.integer("n_layers", n_layers, 1)
    cut = max(1, n_layers // 3)
    return {"first third": list(range(cut)), "last two thirds": list(range(cut, n_layers))}


def variants(pair: dict, items, params: dict, band_lam: float | None, progress: bool = True) -> dict:
    """TA, TIES, the layer and module ablations at ``ablation_lambda`` (and, tagged ``@ λ x``, at each of
    ``extra_ablation_lambdas``), the decoding grid at ``band_lam``."""
    from tqdm import tqdm

    lam = params["ablation_lambda"]
    jobs: list[tuple[str, Callable[[], dict], dict, dict]] = []
    if pair["base"] is not None:
        models_ = {"instruct": pair["instruct"], "thinking": pair["thinking"]}
        jobs.append(("TA", lambda: M.task_arithmetic(pair["base"], models_, scale=params["ta_scale"]),
                     decoding_for(None, params), {"ta": params["ta_scale"], "base": pair["base_digest"]}))
        jobs.append(("TIES", lambda: M.ties(pair["base"], models_, density=params["ties_density"],
                                            scale=params["ties_scale"]),
                     decoding_for(None, params), {"ties": [params["ties_density"], params["ties_scale"]],
                                                  "base": pair["base_digest"]}))
    extra = [float(x) for x in params.get("extra_ablation_lambdas", []) if float(x) != float(lam)]
    for i, at in enumerate([lam] + extra):
        tag = "" if i == 0 else f" @ λ {at:g}"  # the verdicts read the untagged (ablation_lambda) rows
        for name, layers in thirds(pair["n_layers"]).items():
            if not layers:  # a one-layer model has no "last two thirds"
                continue
            jobs.append((f"layers: {name}{tag}",
                         lambda layers=layers, at=at: merged(pair, params, at, layers=layers),
                         decoding_for(at, params), {"lam": at, "layers": layers}))
        for mod in M.MODULES:
            jobs.append((f"{mod} only{tag}",
                         lambda mod=mod, at=at: merged(pair, params, at, modules=mod),
                         decoding_for(at, params), {"lam": at, "modules": mod}))
    if band_lam is not None:
        for t in params["grid_temperatures"]:
            for p in params["grid_top_ps"]:
                dec = decoding_for(band_lam, params, temperature=t, top_p=p)
                jobs.append((f"λ {band_lam:g}, T {t:g}, top-p {p:g}",
                             lambda: merged(pair, params, band_lam), dec,
                             {"lam": band_lam}))
    out = {}
    for name, make, dec, key in tqdm(jobs, desc="baselines and ablations", disable=not progress):
        out[name] = evaluate(pair, make, name, items, dec, params, cache_key=key)
    return out


def gsm8k(pair: dict, params: dict, lams: Sequence[float], progress: bool = True) -> dict:
    """The real GSM8K questions at a few λ (k = 1 at the paper's decoding): {λ: record}."""
    split = params["gsm8k_split"]
    if split == "none":
        return {}
    qs = problems.gsm8k_test(templates=problems.gsm8k_templates(split))
    out = {}
    for lam in lams:
        out[lam] = evaluate(pair, lambda lam=lam: merged(pair, params, lam), label_of(lam), qs,
                            decoding_for(lam, params), params, k=1,
                            max_new_tokens=params["gsm8k_max_new_tokens"], cache_key={"lam": lam, "gsm8k": split},
                            progress=progress)
    return out


def endpoint_error(pair: dict) -> float:
    """max |Θ(0) − Instruct| and |Θ(1) − Thinking| over every tensor."""
    worst = 0.0
    for lam, ref in ((0.0, pair["instruct"]), (1.0, pair["thinking"])):
        merged = M.interpolate(pair["instruct"], pair["thinking"], lam)
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


def run(params: dict, progress: bool = True) -> dict:
    """The whole study: pair, checks, sweep, band, variants, GSM8K; the inputs of :func:`record_claims`."""
    pair = load_pair(params, progress=progress)
    pair["digest"] = _digest([pair["source"], state_digest(pair["instruct"]), state_digest(pair["thinking"]),
                              params["dtype"]])
    pair["base_digest"] = state_digest(pair["base"]) if pair["base"] is not None else None
    items = pair_mod.eval_problems(params["eval_problems"], params["seed"] + 1000, max_terms=params["max_terms"],
                                   exclude=pair_mod.training_problems(params["train_problems"], params["seed"],
                                                                      max_terms=params["max_terms"],
                                                                      gsm_share=params["gsm_share"])
                                   if not params["instruct"] else ())
    sw = sweep(pair, items, params, progress)
    lams = list(sw)
    think = [summary(sw[x])["think"] for x in lams]
    b = band(lams, think)
    mid = None
    if b is not None:  # the decoding grid at the grid λ closest to Think #R = 1/2 inside the band
        inside = [x for x in lams if b[0] <= x <= b[1]]
        mid = min(inside, key=lambda x: abs(summary(sw[x])["think"] - 0.5))
    var = variants(pair, items, params, mid, progress)
    gsm = gsm8k(pair, params, sorted({0.0, float(params["best_lambda"]), 1.0}), progress)
    return {"sweep": sw, "band": b, "band_lambda": mid, "variants": var, "gsm8k": gsm, "items": items,
            "sigma": M.similarity(pair["instruct"], pair["thinking"]),
            "sigma_pooled": M.similarity(pair["instruct"], pair["thinking"], reduce="pooled"),
            "endpoint_error": endpoint_error(pair), "n_layers": pair["n_layers"], "source": pair["source"],
            "logs": pair.get("logs", {}), "n_resamples": params["n_resamples"],
            "best_lambda": float(params["best_lambda"]), "pair": pair}


# --------------------------------------------------------------------------------------------
# tables


def curve_frame(results: dict):
    import pandas as pd

    rows = []
    for lam, rec in results["sweep"].items():
        s = summary(rec)
        rows.append({"λ": lam, **s})
    return pd.DataFrame(rows).set_index("λ")


def comparison_frame(results: dict):
    """Our Table 2 beside the paper's: Instruct, Thinking, TA, TIES and MI at the paper's λ values;
    our Mean@k with its 95% bootstrap interval over problems."""
    import pandas as pd

    sw, var = results["sweep"], results["variants"]
    ours = {"Instruct": sw.get(0.0), "Thinking": sw.get(1.0), "TA": var.get("TA"), "TIES": var.get("TIES")}
    for lam in (0.4, 0.5, 0.6, 0.8):
        ours[label_of(lam)] = sw.get(lam)
    rows = []
    for name, rec in ours.items():
        p = PAPER_TABLE2[name]
        row = {"method": name, "paper Mean@64": p[0], "paper Pass@64": p[1], "paper tokens": p[2], "paper Think %": p[3]}
        if rec is not None:
            s = summary(rec)
            iv = mean_interval(per_problem(rec)["mean@k"], int(results.get("n_resamples", 1999)))
            row.update({"ours Mean@k": 100 * s["mean@k"], "Mean@k lo": 100 * iv.lo, "Mean@k hi": 100 * iv.hi,
                        "ours Pass@k": 100 * s["pass@k"],
                        "ours Vote@k": 100 * s["vote@k"], "ours tokens": s["tokens"], "ours Think %": 100 * s["think"]})
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


# --------------------------------------------------------------------------------------------
# verdicts


def mean_interval(values, n_resamples: int) -> stats.Interval:
    """Mean over problems with a bootstrap interval (resampling problems)."""
    v = np.asarray(values, dtype=float)
    return stats.paired_bootstrap(v, np.zeros_like(v), "mean_diff", n_resamples=n_resamples, unit="problems")


def _boot_problems(fn: Callable[[np.ndarray], float], n: int, n_resamples: int, seed: int = 0) -> stats.Interval:
    """Percentile bootstrap of ``fn(indices)`` over resampled problems (for statistics BCa cannot take)."""
    rng = np.random.default_rng(seed)
    est = fn(np.arange(n))
    draws = np.array([fn(rng.integers(0, n, n)) for _ in range(n_resamples)])
    # order statistics, not interpolated ones: a statistic may be inf (e.g. a curve that never gets there)
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    lo, hi = min(float(lo), est), max(float(hi), est)
    return stats.Interval(float(est), lo, hi, 0.95, "percentile bootstrap over problems", n)


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every claim from :func:`run`'s results; every interval resamples problems.

    ``results``: ``sweep`` {λ: record}, ``band`` (lo, hi) or None, ``band_lambda``, ``variants``
    {name: record}, ``best_lambda``, ``sigma``, ``endpoint_error``, ``n_resamples``.
    """
    sw, var = results["sweep"], results["variants"]
    nr = int(results.get("n_resamples", 1999))
    lams = list(sw)
    pp = {lam: per_problem(rec) for lam, rec in sw.items()}
    n = len(next(iter(pp.values()))["think"])
    think_m = np.stack([pp[x]["think"] for x in lams], axis=1)

    def diff(a, b):
        return stats.paired_bootstrap(a, b, "mean_diff", n_resamples=nr, unit="problems")

    # stage 2: the band
    iv = _boot_problems(lambda idx: band_width(lams, think_m[idx]), n, nr)
    b = results["band"]
    width_all = band_width(lams, think_m)
    ledger.record("think_sigmoid", width_all, interval=iv,
                  shown=(f"{width_all:.3f}" if width_all != NEVER else
                         "no rise: Think #R never goes from ≤ 10% to ≥ 90% (width recorded as 2, wider than any λ range)")
                        + (f" (band λ {b[0]:g} → {b[1]:g})" if b else ""),
                  note="Think #R of every λ: " + ", ".join(f"{x:g}: {summary(sw[x])['think']:.2f}" for x in lams))
    if b is None:
        for cid in ("mean_jumps", "length_grows"):
            ledger.untested(cid, "Think #R never goes from ≤ 10% to ≥ 90% along λ: no band to measure across")
    else:
        lo, hi = b
        d = (pp[hi]["mean@k"] - pp[lo]["mean@k"]) - (pp[hi]["pass@k"] - pp[lo]["pass@k"])
        iv = mean_interval(d, nr)
        sl, sh = summary(sw[lo]), summary(sw[hi])
        ledger.record("mean_jumps", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {sl['mean@k']:.3f} → {sh['mean@k']:.3f}, Pass@k "
                            f"{sl['pass@k']:.3f} → {sh['pass@k']:.3f}, λ {lo:g} → {hi:g})",
                      note="per problem, paired over the band's two ends")
        if hi < 1.0:
            iv = stats.paired_bootstrap(pp[1.0]["tokens"], pp[hi]["tokens"], "ratio_of_means", n_resamples=nr,
                                        unit="problems")
            ledger.record("length_grows", iv.estimate, interval=iv,
                          shown=f"{iv.estimate:.3f}× ({summary(sw[1.0])['tokens']:.1f} vs {sh['tokens']:.1f} tokens "
                                f"at λ {hi:g})", note="mean tokens per problem, paired")
        else:
            ledger.untested("length_grows", "the band ends at λ = 1: nothing lies past it")
    # the best λ against Thinking and the baselines
    best = results["best_lambda"]
    if best in pp and 1.0 in pp:
        iv = diff(pp[best]["mean@k"], pp[1.0]["mean@k"])
        ledger.record("matches_thinking", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (Mean@k {summary(sw[best])['mean@k']:.3f} at λ {best:g} vs "
                            f"{summary(sw[1.0])['mean@k']:.3f})", note="paired over problems")
        iv = stats.paired_bootstrap(pp[best]["tokens"], pp[1.0]["tokens"], "ratio_of_means", n_resamples=nr,
                                        unit="problems")
        ledger.record("fewer_tokens", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:.3f}× ({summary(sw[best])['tokens']:.1f} vs {summary(sw[1.0])['tokens']:.1f})",
                      note="mean tokens per problem, paired")
        if "TA" in var and "TIES" in var:
            ivs = {m: diff(pp[best]["mean@k"], per_problem(var[m])["mean@k"]) for m in ("TA", "TIES")}
            test = next(c for c in CLAIMS if c.id == "beats_merging").test
            verdicts = {m: test.decide(v) for m, v in ivs.items()}
            # holds only if it holds against both; does not hold if it fails against either
            rank = {C.FAILS: 0, C.INCONCLUSIVE: 1, C.HOLDS: 2}
            pick = min(ivs, key=lambda m: (rank[verdicts[m]], ivs[m].lo))
            ledger.record("beats_merging", ivs[pick].estimate, interval=ivs[pick],
                          shown="; ".join(f"vs {m} {v.estimate:+.3f} [{v.lo:+.3f}, {v.hi:+.3f}]" for m, v in ivs.items()),
                          note=f"decided on the least favourable comparison ({pick}): it must hold against both")
        else:
            ledger.untested("beats_merging", "no shared base checkpoint: TA and TIES need one")
    else:
        for cid in ("matches_thinking", "fewer_tokens", "beats_merging"):
            ledger.untested(cid, f"best_lambda {best:g} or λ = 1 is not in the sweep")
    # ablations
    if "mlp only" in var and "attn only" in var:
        iv = diff(per_problem(var["mlp only"])["think"], per_problem(var["attn only"])["think"])
        ledger.record("mlp_drives", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (MLP only {summary(var['mlp only'])['think']:.2f}, attention only "
                            f"{summary(var['attn only'])['think']:.2f})", note="paired over problems")
    else:
        ledger.untested("mlp_drives", "the module ablation did not run")
    first, late = "layers: first third", "layers: last two thirds"
    if first in var and late in var:
        iv = diff(per_problem(var[late])["think"], per_problem(var[first])["think"])
        ledger.record("late_layers", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} (last two thirds {summary(var[late])['think']:.2f}, first third "
                            f"{summary(var[first])['think']:.2f})", note="paired over problems")
    else:
        ledger.untested("late_layers", "the layer ablation did not run")
    grid = [k for k in var if k.startswith("λ ") and ", T " in k]
    if len(grid) >= 2:
        accs = np.stack([per_problem(var[g])["mean@k"] for g in grid], axis=1)
        iv = _boot_problems(lambda idx: float(np.ptp(accs[idx].mean(axis=0))), n, nr)
        ledger.record("decoding_robust", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:.3f} (" + ", ".join(f"{g.split(', ', 1)[1]}: {summary(var[g])['mean@k']:.3f}"
                                                            for g in grid) + ")",
                      note=f"at {grid[0].split(',')[0]}")
    else:
        ledger.untested("decoding_robust", "no band (or a grid of one setting): the decoding grid did not run")
    # checks
    if 1.0 in pp:
        iv = mean_interval(pp[1.0]["think"], nr)
        ledger.record("thinking_thinks", iv.estimate, interval=iv, shown=f"{iv.estimate:.3f}")
    if 0.0 in pp and 1.0 in pp:
        iv = diff(pp[1.0]["mean@k"], pp[0.0]["mean@k"])
        ledger.record("thinking_better", iv.estimate, interval=iv,
                      shown=f"{iv.estimate:+.3f} ({summary(sw[1.0])['mean@k']:.3f} vs {summary(sw[0.0])['mean@k']:.3f})")
    ledger.record("endpoints_exact", float(results["endpoint_error"]), shown=f"{results['endpoint_error']:g}")
    ledger.record("pair_close", float(results["sigma"]), shown=f"{results['sigma']:.4f} (pooled "
                                                              f"{results.get('sigma_pooled', float('nan')):.4f})")


# --------------------------------------------------------------------------------------------
# benchmarks


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench model_interpolation``: merge time and peak memory, in memory and streamed."""
    from acl26.papers.model_interpolation import bench

    out = bench.benchmarks(quick)
    out["title"] = "Merging two checkpoints: time and peak memory"
    return out
