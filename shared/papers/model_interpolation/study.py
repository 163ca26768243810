"""Model-interpolation chapter (ACL 2026, arXiv 2510.10977): parameters, claims, the sweep, verdicts.

Backs ``notebooks/model_interpolation.ipynb``. The merge is :mod:`.merge`, the pair :mod:`.pair`,
the generation loop :mod:`.rollout`. Here: the pair (made here or any local checkpoints,
:func:`load_pair`), one evaluated configuration (:func:`evaluate`: k rollouts of every problem
under one merged model and one decoding, cached), the λ sweep with its fine grid in the
transition band (:func:`sweep`), the baselines and ablations (:func:`variants`), the stage bands
(:func:`band`), and :func:`run`, all of them: what :func:`.verdicts.record_claims` reads. The
parameters and claims are :mod:`.spec`.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from acl26 import checks, evaluation, io, models, paths, problems, stats
from acl26.papers.model_interpolation import merge as M
from acl26.papers.model_interpolation import pair as pair_mod
from acl26.papers.model_interpolation import rollout as R
from acl26.papers.model_interpolation.spec import CLAIMS, PAPER_TABLE2, SPEC  # noqa: F401

#: Think #R thresholds that delimit the transition band (stage 2)
BAND_LOW, BAND_HIGH = 0.1, 0.9


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


def merged(pair: dict, params: dict, lam: float, *, layers=None, modules=None, skip=None, skip_layers=None) -> dict:
    """Θ(λ) as a state dict: in memory, or (``merge="streamed"``) written by :func:`.merge.interpolate_files`
    from the two checkpoint folders into a scratch folder and read back (the inputs never in memory at once).
    ``layers``, ``modules``, ``skip`` and ``skip_layers`` are :func:`.merge.interpolate`'s."""
    sel = dict(layers=layers, modules=modules, skip=skip, skip_layers=skip_layers)
    if params["merge"] == "memory":
        return M.interpolate(pair["instruct"], pair["thinking"], lam, **sel)
    from safetensors.torch import load_file

    scratch = paths.cache_dir() / "model_interpolation" / "streamed-merge"
    M.interpolate_files(pair["instruct_dir"], pair["thinking_dir"], scratch, lam, **sel)
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
    """Per-problem Mean@k, Pass@k (unbiased, from all samples), Think #R, mean tokens, and the share of its
    responses cut off at the token cap (``cut``)."""
    k = rec["k"]
    acc = np.array([np.mean(r[:k]) for r in rec["correct"]], dtype=float)
    pas = np.array([evaluation.pass_at_k(len(r), int(sum(r)), k) for r in rec["correct"]], dtype=float)
    think = np.array([np.mean(r) for r in rec["think"]], dtype=float)
    tokens = np.array([np.mean(r) for r in rec["tokens"]], dtype=float)
    cut = np.array([1.0 - np.mean(r) for r in rec["finished"]], dtype=float)
    return {"mean@k": acc, "pass@k": pas, "think": think, "tokens": tokens, "cut": cut}


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


PER_PROBLEM = ("correct", "tokens", "think", "answers", "golds", "finished")


def head(rec: dict, n: int) -> dict:
    """The record of the first ``n`` problems of ``rec`` (its rollouts as they were sampled)."""
    n = checks.integer("n", n, 1)
    if n > len(rec["correct"]):
        raise ValueError(f"head: the record has {len(rec['correct'])} problems, fewer than {n}")
    return {**rec, **{f: rec[f][:n] for f in PER_PROBLEM}, "examples": rec["examples"][:n]}


def sweep(pair: dict, items, params: dict, progress: bool = True, given: dict | None = None) -> dict:
    """Every λ of the coarse grid, then ``fine_points`` more in the transition band: {λ: record}.

    ``given``: records already made at some λ (of these ``items``, or of a longer list that starts with
    them: they are cut to ``items``)."""
    from tqdm import tqdm

    out = {lam: head(rec, len(items)) for lam, rec in (given or {}).items()}

    def run(lams):
        for lam in tqdm([x for x in lams if x not in out], desc="λ sweep", disable=not progress):
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


def ablation_lambda(band_: tuple[float, float] | None, offset: float) -> float | None:
    """Where the verdicts' ablations run: the band's upper end + ``offset``, as the paper does (band 0.4 → 0.6,
    MI-0.8 and its ablations at 0.8); accuracy-blind. None without a band, or where that lies past λ = 1.
    The λ compared with Thinking and the baselines is the same point when it lies below 1 (:func:`best_lambda`)."""
    offset = checks.number("offset", offset, 0.0)
    if band_ is None:
        return None
    at = round(float(band_[1]) + offset, 6)
    return at if at <= 1.0 else None


def best_lambda(band_: tuple[float, float] | None, offset: float) -> float | None:
    """The λ < 1 compared with Thinking and the baselines: the band's upper end + ``offset`` (the paper's MI-0.8:
    band 0.4 → 0.6, + 0.2), fixed by the Think #R curve alone, never by accuracy. None without a band, or where
    that point is λ = 1 (Thinking itself) or past it."""
    at = ablation_lambda(band_, offset)
    return at if at is not None and at < 1.0 else None


#: the ablation rows the verdicts read (paper §5.3, Fig. 5, Table 3): one part left at Instruct, every other tensor
#: (embeddings, norms, head, the other part) interpolated. "attn at Instruct" is the paper's "w/o MHA" (it still
#: thinks, 99.9%), "mlp at Instruct" its "w/o FFN" (0.7%); "layers: first third interpolated" leaves the last
#: two thirds at Instruct (the paper's [0, 11] row: Think 0%), "layers: last two thirds interpolated" the first
#: third ([12, 35]: 100%)
SKIP_ATTN, SKIP_MLP = "attn at Instruct", "mlp at Instruct"
ONLY_FIRST, ONLY_LATE = "layers: first third interpolated", "layers: last two thirds interpolated"


def ablations(n_layers: int) -> dict[str, dict]:
    """The ablation merges: {row name: :func:`merged` keywords} (a one-layer model has no layer ablation)."""
    parts = thirds(n_layers)
    out = {SKIP_ATTN: {"skip": "attn"}, SKIP_MLP: {"skip": "mlp"}}
    if parts["last two thirds"]:
        out[ONLY_FIRST] = {"skip_layers": parts["last two thirds"]}
        out[ONLY_LATE] = {"skip_layers": parts["first third"]}
    return out


def grid_name(lam: float, temperature: float, top_p: float) -> str:
    return f"λ {lam:g}, T {temperature:g}, top-p {top_p:g}"


def ties_name(density: float) -> str:
    return f"TIES (density {density:g})"


def variants(pair: dict, items, params: dict, grid_lam: float | None, ablation_at: float | None = None, *,
             grid_items=None, progress: bool = True) -> dict:
    """TA and TIES (at each of ``ties_densities``), the layer and module ablations (:func:`ablations`) at
    ``ablation_at`` (untagged: the rows the verdicts read) and, tagged ``@ λ x``, at each of
    ``extra_ablation_lambdas``, all on ``items``; the decoding grid (``grid_temperatures`` × ``grid_top_ps``,
    ``grid_k`` rollouts) and its control (``grid_control_temperature``) at ``grid_lam`` on ``grid_items``
    (default ``items``)."""
    from tqdm import tqdm

    grid_items = items if grid_items is None else grid_items
    jobs: list[tuple[str, Callable[[], dict], dict, dict, object, int | None]] = []
    if pair["base"] is not None:
        models_ = {"instruct": pair["instruct"], "thinking": pair["thinking"]}
        jobs.append(("TA", lambda: M.task_arithmetic(pair["base"], models_, scale=params["ta_scale"]),
                     decoding_for(None, params), {"ta": params["ta_scale"], "base": pair["base_digest"]}, items, None))
        for d in params["ties_densities"]:
            jobs.append((ties_name(d), lambda d=d: M.ties(pair["base"], models_, density=d, scale=params["ties_scale"]),
                         decoding_for(None, params), {"ties": [d, params["ties_scale"]], "base": pair["base_digest"]},
                         items, None))
    extra = [float(x) for x in params.get("extra_ablation_lambdas", []) if ablation_at is None or float(x) != ablation_at]
    for i, at in enumerate(([ablation_at] if ablation_at is not None else []) + extra):
        tag = "" if (i == 0 and ablation_at is not None) else f" @ λ {at:g}"  # the verdicts read the untagged rows
        for name, sel in ablations(pair["n_layers"]).items():
            jobs.append((f"{name}{tag}", lambda sel=sel, at=at: merged(pair, params, at, **sel),
                         decoding_for(at, params), {"lam": at, **sel}, items, None))
    if grid_lam is not None:
        for t in params["grid_temperatures"]:
            for p in params["grid_top_ps"]:
                jobs.append((grid_name(grid_lam, t, p), lambda: merged(pair, params, grid_lam),
                             decoding_for(grid_lam, params, temperature=t, top_p=p), {"lam": grid_lam}, grid_items,
                             params["grid_k"]))
        hot = params["grid_control_temperature"]
        jobs.append((control_name(grid_lam, hot), lambda: merged(pair, params, grid_lam),
                     decoding_for(grid_lam, params, temperature=hot), {"lam": grid_lam}, grid_items, params["grid_k"]))
    out = {}
    for name, make, dec, key, its, k in tqdm(jobs, desc="baselines and ablations", disable=not progress):
        out[name] = evaluate(pair, make, name, its, dec, params, cache_key=key, k=k)
    return out


def control_name(lam: float, temperature: float) -> str:
    """The decoding grid's control row: the grid's λ at a temperature that must matter."""
    return f"λ {lam:g}, T {temperature:g} (must matter)"


def grid_default(lam: float, params: dict) -> str | None:
    """The grid row whose decoding is the paper's default at ``lam`` (None when the grid lacks it)."""
    d = decoding_for(lam, params)
    for t in params["grid_temperatures"]:
        for p in params["grid_top_ps"]:
            if float(t) == d["temperature"] and float(p) == d["top_p"]:
                return grid_name(lam, t, p)
    return None


def grid_lambda(lams: Sequence[float], think: Sequence[float]) -> float | None:
    """The decoding grid's λ: the largest λ of the curve below its first Think #R ≥ 90% with Think #R ≤ 10%
    (the band's lower end: the last stage-1 point, the analogue of the paper's MI-0.4); None without a band."""
    b = band(lams, think)
    return None if b is None else b[0]


def gsm8k(pair: dict, params: dict, lams: Sequence[float], progress: bool = True) -> dict:
    """The real GSM8K questions at a few λ (``gsm8k_k`` rollouts each, the paper's decoding): {λ: record}."""
    split = params["gsm8k_split"]
    if split == "none":
        return {}
    qs = problems.gsm8k_test(templates=problems.gsm8k_templates(split))
    out = {}
    for lam in lams:
        out[lam] = evaluate(pair, lambda lam=lam: merged(pair, params, lam), label_of(lam), qs,
                            decoding_for(lam, params), params, k=params["gsm8k_k"],
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


def run_experiments(params: dict, progress: bool = True) -> dict:
    """The whole study: pair, checks, sweep, band, the decisive configurations, variants, GSM8K; the inputs of
    :func:`record_claims`.

    The verdicts are decided on ``power_problems`` held-out problems at λ = 0, the band's two ends,
    ``best_lambda`` (the band's end + ``ablation_offset``, fixed by the Think #R curve) and 1 (``decisive``,
    {λ: record}), and at TA, TIES, the ablations and the decoding grid (at the band's lower end). The
    sweep's curve uses the first ``eval_problems`` of them (where a λ is decisive, its record cut to those
    problems)."""
    from tqdm import tqdm

    pair = load_pair(params, progress=progress)
    pair["digest"] = _digest([pair["source"], state_digest(pair["instruct"]), state_digest(pair["thinking"]),
                              params["dtype"]])
    pair["base_digest"] = state_digest(pair["base"]) if pair["base"] is not None else None
    items = pair_mod.eval_problems(params["power_problems"], params["seed"] + 1000, max_terms=params["max_terms"],
                                   exclude=pair_mod.training_problems(params["train_problems"], params["seed"],
                                                                      max_terms=params["max_terms"],
                                                                      gsm_share=params["gsm_share"])
                                   if not params["instruct"] else ())
    sweep_items = items[:params["eval_problems"]]
    decisive: dict[float, dict] = {}

    def decide_at(lams):
        for lam in tqdm([x for x in lams if x not in decisive], desc="decisive λ", disable=not progress):
            decisive[lam] = evaluate(pair, lambda lam=lam: merged(pair, params, lam), label_of(lam), items,
                                     decoding_for(lam, params), params, cache_key={"lam": lam})

    decide_at([0.0, 1.0])
    sw = sweep(pair, sweep_items, params, progress, given=decisive)
    lams = list(sw)
    think = [summary(sw[x])["think"] for x in lams]
    b = band(lams, think)
    at = ablation_lambda(b, params["ablation_offset"])
    best = best_lambda(b, params["ablation_offset"])
    grid_at = grid_lambda(lams, think)
    decide_at(sorted({*(b or ()), *([best] if best is not None else [])}))
    var = variants(pair, items, params, grid_at, at, progress=progress)
    gsm = gsm8k(pair, params, sorted({0.0, 1.0, *([best] if best is not None else [])}), progress)
    return {"sweep": sw, "decisive": dict(sorted(decisive.items())), "band": b, "grid_lambda": grid_at,
            "ablation_lambda": at, "ablation_offset": float(params["ablation_offset"]), "variants": var,
            "grid": [grid_name(grid_at, t, p) for t in params["grid_temperatures"] for p in params["grid_top_ps"]]
            if grid_at is not None else [],
            "grid_default": grid_default(grid_at, params) if grid_at is not None else None,
            "grid_control": control_name(grid_at, params["grid_control_temperature"]) if grid_at is not None else None,
            "ties": [ties_name(d) for d in params["ties_densities"]] if pair["base"] is not None else [],
            "gsm8k": gsm, "items": items,
            "sigma": M.similarity(pair["instruct"], pair["thinking"]),
            "sigma_pooled": M.similarity(pair["instruct"], pair["thinking"], reduce="pooled"),
            "endpoint_error": endpoint_error(pair), "n_layers": pair["n_layers"], "source": pair["source"],
            "logs": pair.get("logs", {}), "n_resamples": params["n_resamples"],
            "best_lambda": best, "pair": pair}


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
    our Mean@k with its 95% bootstrap interval over problems (on ``power_problems`` where the λ is decisive,
    else on the sweep's problems: the ``problems`` column says which)."""
    import pandas as pd

    sw, var, dec = results["sweep"], results["variants"], results.get("decisive", {})
    ties = [var[n] for n in results.get("ties", []) if n in var]
    ours = {"Instruct": dec.get(0.0, sw.get(0.0)), "Thinking": dec.get(1.0, sw.get(1.0)), "TA": var.get("TA"),
            # the paper's TIES is density 0.2 (its "sparsity 0.2"): the first of ties_densities
            "TIES": ties[0] if ties else None}
    for lam in (0.4, 0.5, 0.6, 0.8):
        ours[label_of(lam)] = dec.get(lam, sw.get(lam))
    rows = []
    for name, rec in ours.items():
        p = PAPER_TABLE2[name]
        row = {"method": name, "paper Mean@64": p[0], "paper Pass@64": p[1], "paper tokens": p[2], "paper Think %": p[3]}
        if rec is not None:
            s = summary(rec)
            iv = mean_interval(per_problem(rec)["mean@k"], int(results.get("n_resamples", 1999)))
            row.update({"problems": len(rec["correct"]), "ours Mean@k": 100 * s["mean@k"], "Mean@k lo": 100 * iv.lo, "Mean@k hi": 100 * iv.hi,
                        "ours Pass@k": 100 * s["pass@k"],
                        "ours Vote@k": 100 * s["vote@k"], "ours tokens": s["tokens"], "ours Think %": 100 * s["think"]})
        rows.append(row)
    return pd.DataFrame(rows).set_index("method")


def mean_interval(values, n_resamples: int) -> stats.Interval:
    """Mean over problems with a bootstrap interval (resampling problems)."""
    v = np.asarray(values, dtype=float)
    return stats.paired_bootstrap(v, np.zeros_like(v), "mean_diff", n_resamples=n_resamples, unit="problems")
