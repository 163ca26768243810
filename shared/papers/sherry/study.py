"""Sherry chapter (ACL 2026, arXiv 2601.07892): parameters, claims, accuracy experiments, benchmarks.

Backs ``notebooks/sherry.ipynb``. The packed formats and kernels are :mod:`acl26.kernels.ternary`,
the QAT machinery :mod:`.qat`, the decoders of real shapes :mod:`.decoder`, the decode-speed table
:mod:`.speed`, the paper's figures :mod:`.paper`, the kernel benchmarks :mod:`.kernel_bench`. Here:
post-training 3:4 ternary on SmolLM2 (:func:`ptq_smollm2`), quantization-aware training of the
shared dense LM in four variants with equal steps (:func:`qat`), and the check that the trained
ternary model computes the same perplexity through the packed 1.25-bit kernels
(:func:`packed_perplexity`), and :func:`record_claims`, which decides every claim from the results.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from acl26 import claims as C
from acl26 import evaluation, models, training, zoo
from acl26.checks import SEED_MAX
from acl26.papers.sherry import decoder, kernel_bench, llamacpp, speed
from acl26.papers.sherry import paper as sherry_paper
from acl26.papers.sherry import qat as sherry
from acl26.params import Param, ParamSpec

VARIANTS = {
    "fp": ("fp", False, "full precision (continued training)"),
    "absmean": ("absmean", False, "absmean ternary, 1.58-bit (BitNet b1.58)"),
    "sparse34": ("sparse34", False, "3:4 ternary, 1.25-bit, without Arenas"),
    "sparse34+arenas": ("sparse34", True, "3:4 ternary, 1.25-bit, with Arenas (Sherry)"),
}

SPEC = ParamSpec(
    paper="sherry",
    params=(
        Param("speed_shapes", list, "model shapes for the decode-speed table", elem=str,
              choices=tuple(decoder.SHAPES) + tuple(decoder.ALIASES)),
        Param("speed_formats", list, "weight formats for the decode-speed table", elem=str,
              choices=tuple(decoder.FORMATS)),
        Param("speed_tokens", int, "decode steps timed per (shape, format)", min=1),
        Param("speed_repeats", int, "timing repeats (medians are reported)", min=1),
        Param("speed_peers", list, "llama.cpp decode peers timed in the same rounds (llama-bench on GGUF files of "
              "each shape; skipped, saying why, where llama.cpp is not built)", elem=str, min_len=0,
              choices=tuple(llamacpp.PEERS)),
        Param("peer_rounds", int, "rounds of the GEMV comparison with llama.cpp's TQ1_0 / TQ2_0 (when built)", min=1),
        Param("ptq_chars", int, "characters of the 2016 State of the Union scored with SmolLM2 (0: all)", min=0,
              rule=(f"must be 0 (the whole address) or at least {zoo.MIN_PPL_CHARS} characters (a perplexity needs "
                    "2 tokens)", lambda v: v == 0 or v >= zoo.MIN_PPL_CHARS)),
        Param("models_profile", str, "profile of the shared dense LM to start QAT from", choices=("smoke", "book", "paper")),
        Param("variants", list, "QAT variants, all trained for the same steps", elem=str, choices=tuple(VARIANTS)),
        Param("qat_steps", int, "QAT steps per variant", min=2),
        Param("qat_lr", float, "QAT peak learning rate", min=1e-6, max=1.0),
        Param("eval_blocks", int, "validation blocks for the reported perplexities", min=1),
        Param("track_every", int, "steps between weight-trapping snapshots", min=1),
        Param("seeds", list, "QAT seeds: every variant is trained once per seed, on that seed's batches", elem=int,
              min=0, max=SEED_MAX),
    ),
    profiles={
        "book": dict(speed_shapes=["bitnet-0.7b", "llama-3.2-1b", "bitnet-3b"],
                     speed_formats=["fp32", "bf16", "i2", "tl2", "sherry"], speed_peers=[k for k in llamacpp.PEERS if k != "ggml-f16"],
                     speed_tokens=8, speed_repeats=3,
                     peer_rounds=3, ptq_chars=0, models_profile="book", variants=list(VARIANTS), qat_steps=56, qat_lr=1e-3,
                     eval_blocks=64, track_every=8, seeds=[0, 1, 2]),
        "smoke": dict(speed_shapes=["tiny"], speed_peers=["ggml-f16", "ggml-tq2_0"], speed_tokens=3, speed_repeats=1, peer_rounds=1, ptq_chars=2000,
                      models_profile="smoke", qat_steps=6, eval_blocks=4, track_every=2, seeds=[0, 1]),
        "paper": dict(speed_peers=list(llamacpp.PEERS), speed_tokens=32, speed_repeats=5, qat_steps=1000, eval_blocks=256, seeds=[0, 1, 2]),
    },
    checks=(
        # speed.speed_table: an alias counts as the shape it names
        ("speed_shapes must not name a shape twice (" + ", ".join(f"{a} is {s}" for a, s in decoder.ALIASES.items()) + ")",
         lambda p: len({decoder.ALIASES.get(s, s) for s in p["speed_shapes"]}) == len(p["speed_shapes"])),
    ),
)

_PAPER_MB = {r["format"]: r["mb"] for r in sherry_paper.paper_table() if r["model"] == "0.7B"}
#: the paper's whole-model size of Sherry over I2_S at 0.7B (its table: 205.50 / 256.56 MB)
PAPER_SIZE_RATIO = _PAPER_MB["sherry"] / _PAPER_MB["i2"]

CLAIMS = [
    C.Claim("bits", "3:4 ternary packs into 5 bits per 4 weights", "1.25 bits/weight", "§3 (encoding)",
            C.equals(1.25)),
    C.Claim("size", "Sherry's whole model takes this share of the 2-bit (I2_S) model's bytes",
            f"{PAPER_SIZE_RATIO:.1%} (0.7B: {_PAPER_MB['sherry']:.2f} / {_PAPER_MB['i2']:.2f} MB)", "speed/size table",
            C.within(PAPER_SIZE_RATIO, 0.10)),
    C.Claim("speed_vs_tl2", "Sherry decodes faster than the 1.67-bit format (TL2)", "148.27 vs 116.83 tok/s (0.7B)",
            "speed table, i7-14700HX", C.predicate("ours > 1.0×", lambda v: v > 1.0)),
    C.Claim("speed_vs_i2", "Sherry decodes at least as fast as the 2-bit format (I2_S)", "148.27 vs 132.13 tok/s (0.7B)",
            "speed table, i7-14700HX", C.predicate("ours ≥ 1.0×", lambda v: v >= 1.0)),
    C.Claim("speed_vs_ggml", "Sherry's matrix-vector product is faster than llama.cpp's ternary kernels (TQ1_0, TQ2_0) "
            "at the same shape and thread count", "faster than the 2-bit and 1.67-bit kernels (148.27 vs 132.13 and "
            "116.83 tok/s, 0.7B)", "speed table; llama.cpp's TQ types are the public CPU peers",
            C.predicate("ours: the faster TQ kernel's time / Sherry's > 1.0×", lambda v: v > 1.0)),
    C.Claim("ptq_collapses", "Ternarizing a pretrained model without training destroys it (the reason to train)",
            "motivates QAT", "§1-2", C.predicate("ppl ≥ 10× the full-precision model's", lambda v: v >= 10)),
    C.Claim("arenas_gain", "Arenas improves 3:4 ternary training", "+4.59 points average accuracy (1B)",
            "ablation table", C.predicate("ours: lower perplexity with Arenas (ratio < 1)", lambda v: v < 1.0)),
    C.Claim("matches_158", "3:4 ternary with Arenas matches a denser ternary format's accuracy",
            "Sherry .519 = Tequila .519 (1B)", "main table",
            C.predicate("ours: perplexity within 5% of absmean ternary", lambda v: v <= 1.05)),
    C.Claim("trapping", "3:4 sparsity traps weights: more of them stay in one ternary state than in dense ternary",
            "weight trapping, gradient rank collapse", "§3 (Arenas)",
            C.predicate("ours: stuck share of 3:4 minus absmean's > 0", lambda v: v > 0)),
    C.Claim("arenas_frees", "Arenas frees trapped weights", "representational diversity kept", "§3 (Arenas)",
            C.predicate("ours: stuck share at least 1 point lower with Arenas", lambda v: v <= -0.01)),
    C.Claim("packed_exact", "The packed 1.25-bit model computes what the fake-quantized model did",
            "(deployment)", "§4", C.predicate("|Δ ppl| / ppl < 1e-4", lambda v: v < 1e-4)),
]


# --------------------------------------------------------------------------------------------
# post-training quantization of SmolLM2


def ptq_smollm2(params: dict) -> list[dict]:
    """Perplexity of SmolLM2 on the 2016 State of the Union: full precision, absmean and 3:4 ternary (no training)."""
    from acl26 import texts

    doc = next(d for d in texts.sotu_documents() if d.title.startswith("2016"))
    text = doc.text[: params["ptq_chars"]] if params["ptq_chars"] else doc.text
    rows, ids = [], None
    for mode in ("fp", "absmean", "sparse34"):
        model, tok = models.smollm2()  # a fresh copy each time: wrap() quantizes in place (cached load, ~0.2 s)
        if mode != "fp":
            sherry.wrap(model, mode)
        if ids is None:
            ids = tok.encode(text, add_special_tokens=False)
        t0 = time.perf_counter()
        ppl = evaluation.perplexity(model, ids, context_length=1024, stride=1024)
        rows.append({"weights": {"fp": "full precision (dequantised Q4_1)", "absmean": "absmean ternary (PTQ)",
                                 "sparse34": "3:4 ternary (PTQ)"}[mode], "mode": mode, "ppl": ppl.ppl,
                     "tokens": ppl.n_tokens, "seconds": time.perf_counter() - t0})
    return rows


# --------------------------------------------------------------------------------------------
# quantization-aware training of the shared dense LM


def _track(model) -> list[str]:
    """Layers whose trapping statistics are recorded: a middle block's attention and MLP projections."""
    names = [n for n, _ in sherry.quantized_layers(model)]
    mid = model.config.num_hidden_layers // 2
    return [n for n in names if f".layers.{mid}." in n and n.rsplit(".", 1)[-1] in ("q_proj", "up_proj", "down_proj")]


def qat(params: dict, variant: str, *, seed: int | None = None, progress: bool = True):
    """Train one QAT ``variant`` from the shared dense LM for ``qat_steps`` with ``seed`` (default: the
    first of ``seeds``); cached like every model. All variants of one seed see the same batches."""
    seed = params["seeds"][0] if seed is None else seed
    mode, arenas, _ = VARIANTS[variant]
    base, tok, corp = zoo.trained("dense", params["models_profile"], progress=progress)
    mparams = zoo.SPEC.resolve(params["models_profile"])
    train_blocks = torch.from_numpy(corp.blocks("train"))
    val = torch.from_numpy(corp.blocks("validation")[: params["eval_blocks"]])
    cfg = zoo.model_config("dense", mparams, corp.vocab_size)
    tc = training.TrainConfig(steps=params["qat_steps"], batch_size=mparams["batch_size"], lr=params["qat_lr"],
                              warmup_frac=0.05, seed=seed + 1, eval_every=max(1, params["qat_steps"] // 10),
                              eval_blocks=min(32, params["eval_blocks"]), checkpoint_every=max(1, params["qat_steps"] // 5),
                              bf16=mparams["bf16"])

    def start():
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(base.folder)
        return sherry.wrap(model, mode)

    probe = start()
    monitor = sherry.QATMonitor(mode, params["qat_steps"], arenas, _track(probe), every=params["track_every"])
    del probe
    result = training.train(cfg, tc, train_blocks, val, name=f"qat-{variant}-{params['models_profile']}",
                            data_fingerprint=corp.key, init=start, progress=progress, monitor=monitor,
                            key_extra={"base": base.log["key"], "variant": variant, "track_every": params["track_every"]},
                            prepare=lambda m: sherry.wrap(m, mode))
    for _, m in sherry.quantized_layers(result.model):  # inference: pure ternary
        if isinstance(m, sherry.QuantLinear):
            m.lam = 0.0
    return result, val


def trapping_rows(result, variant: str, seed: int) -> list[dict]:
    """Per tracked layer of one QAT run: the stuck share, mean state changes and mean gradient effective rank."""
    mon = result.log["monitor"]
    rows = []
    for layer, share in mon.get("stuck_share", {}).items():
        ranks = [r for _, r in mon["effective_rank"].get(layer, [])]
        rows.append({"variant": variant, "seed": seed, "layer": layer.split("layers.")[-1], "stuck share": share,
                     "mean state changes": mon["mean_flips"][layer],
                     "grad effective rank (mean)": float(np.mean(ranks)) if ranks else float("nan")})
    return rows


def block_nll(runs: dict, val: torch.Tensor) -> dict[str, list[float]]:
    """Per validation block, the mean NLL of each QAT variant's inference model (the same blocks for
    all), for the paired bootstrap of the accuracy claims."""
    return {v: training.block_losses(res.model, val) for v, res in runs.items()}


def packed_perplexity(result, val: torch.Tensor) -> dict:
    """Validation perplexity of a 3:4 QAT model, fake-quantized vs. through the packed kernels."""
    fake = training.evaluate_loss(result.model, val)
    import copy

    packed_model = sherry.to_packed(copy.deepcopy(result.model))
    t0 = time.perf_counter()
    packed = training.evaluate_loss(packed_model, val)
    layers = [m for _, m in packed_model.named_modules() if isinstance(m, sherry.PackedLinear)]
    n_weights = sum(m.in_features * m.out_features for m in layers)
    return {"fake_ppl": math.exp(fake), "packed_ppl": math.exp(packed), "seconds": time.perf_counter() - t0,
            "layers": len(layers), "packed_bytes": sum(m.nbytes for m in layers),
            "bits_per_weight": 8 * sum(m.packed.nbytes for m in layers) / n_weights}


#: the matrix-vector shapes (rows x inputs) at which our kernels are timed beside ggml's: the
#: 4096-square layer of the kernel benchmarks, and the MLP shape of test-backend-ops' perf suite
GEMV_SHAPES = ((4096, 4096), (4096, 14336))


def decoded_shapes(result: dict | None) -> str:
    """The intro's fragment: which (shape, format) pairs the Sherry run decoded and which it skipped."""
    rows = ((result or {}).get("metrics") or {}).get("speed") or []
    if not rows:
        return "*(the Sherry chapter has not run in this build)*\n"
    lines = []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        done = [r["format"] for r in rows if r["shape"] == shape and r["status"] == "ok"]
        skipped = [f"{r['format']} ({r['reason']})" for r in rows if r["shape"] == shape and r["status"] != "ok"]
        text = f"- `{shape}`: decoded in {', '.join(done) or 'no format'}"
        lines.append(text + (f"; skipped: {'; '.join(skipped)}" if skipped else "") + ".")
    return "\n".join(lines) + "\n"


def benchmarks(quick: bool = False) -> dict:
    """``acl26 bench sherry``: the kernel micro-benchmarks and the decode-speed goals."""
    kern = kernel_bench.benchmarks(quick=quick)
    dec = speed.benchmarks(quick=quick)
    peer = _peer_benchmarks(quick)
    return {"title": "Sherry: ternary kernels and decode speed", "rows": kern["rows"] + peer["rows"] + dec["rows"],
            "goals": kern["goals"] + peer["goals"] + dec["goals"],
            "note": f"{kern.get('note', '')} {peer['note']} {dec.get('note', '')}".strip()}


def _peer_benchmarks(quick: bool) -> dict:
    """Our GEMV against llama.cpp's TQ1_0 / TQ2_0 at :data:`GEMV_SHAPES` (skipped, saying so, where it is not built)."""
    from acl26.papers.sherry import llamacpp, peers

    shapes = [(1024, 1024)] if quick else list(GEMV_SHAPES)
    goals = [dict(goal=f"Sherry GEMV faster than llama.cpp's TQ1_0 and TQ2_0 ({m} x {k}, same threads)",
                  target="t(sherry) < t(TQ2_0) and < t(TQ1_0)") for m, k in shapes]
    if not llamacpp.available():
        return {"rows": [], "goals": [dict(g, measured="llama.cpp not built here (acl26 prepare sherry)", met=None)
                                      for g in goals],
                "note": "llama.cpp was not built, so its kernels were not timed."}
    rows, done = [], []
    for (m, k), goal in zip(shapes, goals):
        summary = peers.gemv_summary(peers.gemv_vs_llamacpp((m, k), rounds=1 if quick else 5))
        t = {r["format"]: r for r in summary}
        rows += [dict(benchmark=f"GEMV {r['format']} ({r['source']}, {r['threads']} thread(s))", shape=r["shape"],
                      median_s=r["median_us"] / 1e6, min_s=r["min_us"] / 1e6, max_s=r["max_us"] / 1e6,
                      ratio=t["sherry"]["median_us"] / r["median_us"]) for r in summary]
        met = t["sherry"]["max_us"] < min(t["TQ2_0"]["min_us"], t["TQ1_0"]["min_us"])
        done.append(dict(goal, measured=" / ".join(f"{f} {t[f]['median_us']:.0f} µs" for f in ("sherry", "TQ2_0", "TQ1_0")),
                         met=None if quick else bool(met)))
    return {"rows": rows, "goals": done,
            "note": ("llama.cpp's rows: test-backend-ops perf (its own mean per run), on the threads it uses (half the "
                     "cores); ours at the same shape and threads; rounds alternate which runs first; ratio = Sherry's "
                     "median time / the row's; 'met' needs Sherry's slowest round to beat both peers' fastest.")}


# --------------------------------------------------------------------------------------------
# the verdicts


def record_claims(ledger: C.Ledger, results: dict) -> None:
    """Decide every Sherry claim from the study's results.

    ``results``: ``bits`` (``{format: bits_per_weight(...)}`` at the 4096 x 4096 layer), ``speed``
    (rows of :func:`acl26.papers.sherry.speed.speed_table`), ``ptq`` (rows of :func:`ptq_smollm2`),
    ``qat_ppl`` (``{variant: validation perplexity}``), ``trapping`` (rows ``{"variant", "layer",
    "stuck share", "grad effective rank (mean)"}``) and ``packed`` (:func:`packed_perplexity`'s
    dict, or None), optionally ``qat_seeds`` (``{variant: {seed: validation perplexity}}``; with two
    or more seeds the accuracy and trapping claims are decided on the t-interval over seeds of the
    seed-paired ratio or difference, trapping rows then carrying a ``seed``), and ``qat_block_nll`` (``{variant: per-block mean NLLs}`` on the same
    validation blocks, :func:`acl26.training.block_losses`), on which the accuracy ratios get a
    paired bootstrap interval. The speed claims are decided at the first shape of the speed table
    where all three ternary formats were timed; the size claim on whole-model bytes at the shape of
    the paper's 0.7B row (else the first shape with Sherry and I2). ``llamacpp_gemv`` (rows of
    :func:`acl26.papers.sherry.peers.gemv_vs_llamacpp`, or None with ``llamacpp_reason``) decides
    Sherry against ggml's kernels on the range over rounds of the faster TQ kernel's time over ours,
    at the first matrix shape in the rows (the book: 4096 x 4096). ``speed_vs_tl2`` is decided
    against our TL2 (a lookup kernel, as bitnet.cpp's TL2 is) and ``speed_vs_i2`` against llama.cpp's
    TQ2_0 with an f16 head (row ``ggml-tq2_0``, a direct 2-bit kernel as bitnet.cpp's I2_S is), both on
    the range over rounds of the per-round tok/s ratio; without that row ``speed_vs_i2`` is untested.
    """
    from acl26 import stats

    b = results["bits"]["sherry"]
    ledger.record("bits", float(b["streams"]), shown=f"{b['streams']:.4f} (streams) + {b['scales']:.4f} (scales)")

    rows = results["speed"]
    # size: layout arithmetic of whole models, at the shape that stands for the paper's 0.7B row if timed
    sized = {(r["shape"], r["format"]): r for r in rows if "total_mb" in r}
    size_shapes = [r["shape"] for r in rows if ((r["shape"], "sherry") in sized and (r["shape"], "i2") in sized)]
    size_shape = next((sh for sh in size_shapes if any(r["shape"] == sh and r.get("paper_row") == "0.7B" for r in rows)),
                      size_shapes[0] if size_shapes else None)
    if size_shape:
        a, b = sized[(size_shape, "sherry")], sized[(size_shape, "i2")]
        whole = a["total_mb"] / b["total_mb"]
        ledger.record("size", whole, shown=f"{whole:.1%} of the whole model ({size_shape}: {a['total_mb']:.1f} / "
                                           f"{b['total_mb']:.1f} MB, bf16 embeddings); weight streams alone "
                                           f"{a['stream_bits_per_weight'] / b['stream_bits_per_weight']:.1%}, "
                                           f"with row scales {a['weight_mb'] / b['weight_mb']:.1%}")
    else:
        ledger.untested("size", "the speed table lacks a shape with both Sherry and I2")

    ok = [r for r in rows if r["status"] == "ok"]
    by = {(r["shape"], r["format"]): r for r in ok}
    shape = next((r["shape"] for r in ok if all((r["shape"], f) in by for f in ("sherry", "i2", "tl2"))), None)

    def round_ratios(a, b):
        """Per-round tok/s ratios a / b (the rounds ran both, in a rotating order)."""
        n = min(len(a["decode_runs"]), len(b["decode_runs"]))
        return [x / y for x, y in zip(a["decode_runs"][:n], b["decode_runs"][:n])] or [a["decode_tok_s"] / b["decode_tok_s"]]

    def tok(r):
        return f"{r['decode_tok_s']:.2f} tok/s"

    if shape:
        s, i2, tl2 = by[(shape, "sherry")], by[(shape, "i2")], by[(shape, "tl2")]
        tq1, tq2 = by.get((shape, "ggml-tq1_0")), by.get((shape, "ggml-tq2_0"))
        iv = stats.repeat_range(round_ratios(s, tl2))
        ledger.record("speed_vs_tl2", iv.estimate, interval=iv,
                      shown=f"Sherry {tok(s)} vs our TL2 {tok(tl2)} ({shape}, {s['threads']} threads)"
                            + (f"; llama.cpp TQ1_0 (1.69-bit) {tok(tq1)}" if tq1 else ""),
                      note="TL2 is our lookup-table kernel, a lookup kernel as bitnet.cpp's TL2 is; per-round ratios, "
                           "range over rounds" + ("" if tq1 else "; llama.cpp's TQ1_0 was not timed"))
        if tq2:
            iv = stats.repeat_range(round_ratios(s, tq2))
            ledger.record("speed_vs_i2", iv.estimate, interval=iv,
                          shown=f"Sherry {tok(s)} vs llama.cpp TQ2_0 {tok(tq2)} ({shape}, {s['threads']} threads); "
                                f"our lookup-table I2 {tok(i2)}",
                          note="decided against ggml's TQ2_0, a direct 2-bit decode-and-multiply kernel as bitnet.cpp's "
                               "I2_S is, with embeddings and head in f16 as ours are in bf16; per-round ratios, range "
                               "over rounds")
        else:
            miss = next((r for r in rows if r["shape"] == shape and r["format"] == "ggml-tq2_0"), None)
            ledger.untested("speed_vs_i2", "llama.cpp's TQ2_0 (the direct 2-bit peer) was not timed"
                            + (f": {miss['reason']}" if miss and miss.get("reason") else "")
                            + f"; our lookup-table I2: {tok(i2)} vs Sherry {tok(s)}")
    else:
        for cid in ("speed_vs_tl2", "speed_vs_i2"):
            ledger.untested(cid, "the speed table lacks a shape with all three ternary formats")

    peer = results.get("llamacpp_gemv")
    if peer:
        peer = [r for r in peer if r["shape"] == peer[0]["shape"]]  # decided at the first shape timed
        by_round: dict = {}
        for row in peer:
            by_round.setdefault(row["round"], {})[row["format"]] = row["us"]
        ratios = [min(t["TQ1_0"], t["TQ2_0"]) / t["sherry"] for t in by_round.values()
                  if {"TQ1_0", "TQ2_0", "sherry"} <= set(t)]
        if ratios:
            iv = stats.repeat_range(ratios)
            med = {f: float(np.median([r["us"] for r in peer if r["format"] == f])) for f in ("sherry", "TQ1_0", "TQ2_0")}
            ledger.record("speed_vs_ggml", iv.estimate, interval=iv,
                          shown=f"Sherry {med['sherry']:.0f} µs vs TQ2_0 {med['TQ2_0']:.0f} µs and TQ1_0 {med['TQ1_0']:.0f} µs "
                                f"({peer[0]['shape']}, {peer[0]['threads']} thread(s))")
        else:
            ledger.untested("speed_vs_ggml", "the llama.cpp comparison lacks Sherry, TQ1_0 or TQ2_0")
    else:
        ledger.untested("speed_vs_ggml", results.get("llamacpp_reason") or "llama.cpp was not built here "
                        "(`acl26 prepare sherry`)")

    ptq = {r["mode"]: r["ppl"] for r in results["ptq"]}
    if {"fp", "sparse34"} <= set(ptq):
        fp_ppl, s34 = ptq["fp"], ptq["sparse34"]
        ledger.record("ptq_collapses", s34 / fp_ppl,
                      shown=f"3:4 PTQ ppl {s34:,.0f} vs full precision {fp_ppl:.1f} ({s34 / fp_ppl:,.0f}×)")
    else:
        ledger.untested("ptq_collapses", "full precision and 3:4 PTQ are both needed")

    ppl = results["qat_ppl"]
    nll = results.get("qat_block_nll") or {}
    by_seed = results.get("qat_seeds") or {}  # {variant: {seed: validation perplexity}}

    def paired_seeds(a, b, f):
        """f(a's value, b's value) for every seed both have, or None."""
        common = sorted(set(by_seed.get(a, {})) & set(by_seed.get(b, {})))
        return [f(by_seed[a][s], by_seed[b][s]) for s in common] if len(common) >= 2 else None

    def ratio_verdict(cid, a, b, shown):
        per_seed = paired_seeds(a, b, lambda x, y: x / y)
        if per_seed:
            iv = stats.seed_interval(per_seed)
            ledger.record(cid, iv.estimate, shown=shown + f"; mean ratio over {iv.n} seeds {iv.estimate:.3f}×",
                          interval=iv, note="seeds paired: all variants of one seed see the same batches")
        elif a in nll and b in nll:
            iv = stats.paired_bootstrap(nll[a], nll[b], "ppl_ratio")
            ledger.record(cid, ppl[a] / ppl[b], shown=shown, interval=iv,
                          note="one training seed: the interval covers evaluation noise, not the spread across seeds")
        else:
            ledger.record(cid, ppl[a] / ppl[b], shown=shown, note="one training seed, no interval")

    if {"sparse34", "sparse34+arenas"} <= set(ppl):
        r = ppl["sparse34+arenas"] / ppl["sparse34"]
        ratio_verdict("arenas_gain", "sparse34+arenas", "sparse34",
                      f"{ppl['sparse34+arenas']:.1f} with vs {ppl['sparse34']:.1f} without ({r:.3f}×, first seed)")
    else:
        ledger.untested("arenas_gain", "both 3:4 variants are needed")
    if {"absmean", "sparse34+arenas"} <= set(ppl):
        r = ppl["sparse34+arenas"] / ppl["absmean"]
        ratio_verdict("matches_158", "sparse34+arenas", "absmean",
                      f"{ppl['sparse34+arenas']:.1f} vs absmean {ppl['absmean']:.1f} ({r:.3f}×, first seed)")
    else:
        ledger.untested("matches_158", "absmean and Arenas variants are needed")

    def mean_by(keys, key):
        acc: dict = {}
        for row in results["trapping"]:
            acc.setdefault(tuple(row.get(k) for k in keys), []).append(row[key])
        return {k: float(np.mean(xs)) for k, xs in acc.items()}

    stuck_vs = {k[0]: v for k, v in mean_by(("variant",), "stuck share").items()}
    grank = {k[0]: v for k, v in mean_by(("variant",), "grad effective rank (mean)").items()}
    stuck_vs_seed = mean_by(("variant", "seed"), "stuck share")

    def diff_verdict(cid, a, b, shown):
        seeds = sorted({s for (v, s) in stuck_vs_seed if v == a} & {s for (v, s) in stuck_vs_seed if v == b} - {None})
        value = stuck_vs[a] - stuck_vs[b]
        if len(seeds) >= 2:
            iv = stats.seed_interval([stuck_vs_seed[(a, s)] - stuck_vs_seed[(b, s)] for s in seeds])
            ledger.record(cid, iv.estimate, shown=shown + f"; mean difference over {iv.n} seeds {iv.estimate:+.1%}",
                          interval=iv)
        else:
            ledger.record(cid, value, shown=shown, note="one training seed, no interval")

    if {"sparse34", "absmean"} <= set(stuck_vs):
        diff_verdict("trapping", "sparse34", "absmean",
                     f"stuck share {stuck_vs['sparse34']:.1%} (3:4) vs {stuck_vs['absmean']:.1%} (absmean); "
                     f"gradient effective rank {grank['sparse34']:.1f} vs {grank['absmean']:.1f}")
    else:
        ledger.untested("trapping", "the absmean and 3:4 (no Arenas) variants are needed")
    if {"sparse34", "sparse34+arenas"} <= set(stuck_vs):
        diff_verdict("arenas_frees", "sparse34+arenas", "sparse34",
                     f"stuck share {stuck_vs['sparse34+arenas']:.1%} with Arenas vs {stuck_vs['sparse34']:.1%} without; "
                     f"gradient effective rank {grank['sparse34+arenas']:.1f} vs {grank['sparse34']:.1f}")
    else:
        ledger.untested("arenas_frees", "both 3:4 variants are needed")

    pk = results.get("packed")
    if pk:
        rel = abs(pk["packed_ppl"] - pk["fake_ppl"]) / pk["fake_ppl"]
        ledger.record("packed_exact", rel,
                      shown=f"{pk['packed_ppl']:.4f} packed vs {pk['fake_ppl']:.4f} fake-quantized (rel. {rel:.1e})")
    else:
        ledger.untested("packed_exact", "no 3:4 variant was trained")
