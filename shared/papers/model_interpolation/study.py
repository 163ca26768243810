"""Model-interpolation chapter (ACL 2026, arXiv 2510.10977): the experiments.

Backs ``notebooks/model_interpolation.ipynb``. The merge is :mod:`.merge`, the pair :mod:`.pair`,
the generation loop :mod:`.rollout`, the band and the λ values it places :mod:`.stages`, the ablation
merges :mod:`.ablation`. Here: the pair (made here or any local checkpoints, :func:`load_pair`), one
evaluated configuration (:func:`evaluate`: k rollouts of every problem under one merged model and one
decoding, cached), the λ sweep with its fine grid in the transition band (:func:`sweep`), the baselines
and ablations (:func:`variants`), GSM8K (:func:`gsm8k`), and :func:`run_experiments`, all of them: what
:func:`.verdicts.record_claims` reads and :mod:`.tables` shows. The parameters and claims are :mod:`.spec`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence

import torch

from acl26 import checks, evaluation, io, models, paths, problems
from acl26.papers.model_interpolation import merge as M
from acl26.papers.model_interpolation import pair as pair_mod
from acl26 import rollout as R
from acl26.papers.model_interpolation.ablation import ablations
from acl26.papers.model_interpolation.spec import control_name, grid_name, label_of, ties_name
from acl26.papers.model_interpolation.stages import ablation_lambda, band, best_lambda, fine_grid, grid_lambda
from acl26.papers.model_interpolation.tables import summary


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
           "generated": ro.generated, "backend": ro.backend,
           "examples": [ro.texts[i][0] for i in range(min(3, len(items)))]}
    io.write_json(path, rec)
    return rec


# --------------------------------------------------------------------------------------------
# the sweep, the variants, GSM8K


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


def variants(pair: dict, items, params: dict, grid_lam: float | None, ablation_at: float | None = None, *,
             grid_items=None, progress: bool = True) -> dict:
    """TA and TIES (at each of ``ties_densities``), the layer and module ablations (:func:`.ablation.ablations`) at
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


def grid_default(lam: float, params: dict) -> str | None:
    """The grid row whose decoding is the paper's default at ``lam`` (None when the grid lacks it)."""
    d = decoding_for(lam, params)
    for t in params["grid_temperatures"]:
        for p in params["grid_top_ps"]:
            if float(t) == d["temperature"] and float(p) == d["top_p"]:
                return grid_name(lam, t, p)
    return None


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


def run_experiments(params: dict, progress: bool = True) -> dict:
    """The whole study: pair, checks, sweep, band, the decisive configurations, variants, GSM8K; the inputs of
    :func:`.verdicts.record_claims`.

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
            "endpoint_error": M.endpoint_error(pair["instruct"], pair["thinking"]), "n_layers": pair["n_layers"], "source": pair["source"],
            "logs": pair.get("logs", {}), "n_resamples": params["n_resamples"],
            "best_lambda": best, "pair": pair}
