"""MTA's student and its distillation: layer subset, recovery, the KD (+ MTA) loop, evaluation.

* :func:`layer_subset` picks evenly spaced teacher layers (first and last included) and
  :func:`make_student` copies them, with the teacher's embeddings, final norm and head, into a
  shallower model of the same family.
* :func:`recover` trains that student once on the language-modelling corpus through the book's
  one training loop (:func:`acl26.training.train`, cached): copied layers alone give a broken
  model. Every distillation condition starts from the recovered student.
* :func:`distill` runs one condition: a base KD loss on the response tokens against the teacher's
  cached top-k, plus the MTA terms (DSA on word/phrase units, Hid on projected states) at the key
  layers. It is cached by a hash of its whole configuration, and deterministic for a seed (the
  seed draws the batches).
* :func:`evaluate` scores a model on the held-out pairs: per-pair response NLL (teacher-forced on
  the reference) and ROUGE-L of sampled responses (T = 1, top-p 1, ``rouge_score`` with stemming).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from acl26 import checks, evaluation, io, models, paths, training
from acl26.papers.mta import data as D
from acl26.papers.mta import losses as L

#: bump when the loop changes what it produces
#: (2: importance, pooling and Hid over the content tokens only, not the chat template's;
#: 3: DSA summed over i ≠ j, the paper's form, twice the earlier Σ_{i<j} at the same λ_DSA)
DISTILL_VERSION = 3


def layer_subset(n_teacher: int, n_student: int) -> list[int]:
    """``n_student`` evenly spaced indices of ``n_teacher`` layers, the first and the last included."""
    checks.integer("n_teacher", n_teacher, 1)
    checks.integer("n_student", n_student, 1, n_teacher)
    if n_student == 1:
        return [n_teacher - 1]
    out = [math.floor(i * (n_teacher - 1) / (n_student - 1) + 0.5) for i in range(n_student)]
    if len(set(out)) != len(out):  # pragma: no cover - cannot happen for n_student <= n_teacher
        raise ValueError(f"layers {out} repeat")
    return out


def make_student(teacher, layers: Sequence[int]):
    """A copy of ``teacher`` keeping only decoder ``layers`` (in order), its embeddings, final norm and head."""
    n = teacher.config.num_hidden_layers
    layers = [checks.integer(f"layers[{i}]", x) for i, x in enumerate(layers)]
    if not layers or any(not 0 <= x < n for x in layers) or sorted(set(layers)) != layers:
        raise ValueError(f"layers must be increasing distinct indices in [0, {n}), got {layers}")
    if not any(k.startswith("model.layers.") for k in teacher.state_dict()):
        raise ValueError("make_student copies decoder layers named model.layers.<i> (LLaMA, Qwen, Mistral, SmolLM); "
                         "for another family, give a local start student")
    cfg = copy.deepcopy(teacher.config)
    cfg.num_hidden_layers = len(layers)
    if getattr(cfg, "layer_types", None):
        cfg.layer_types = [cfg.layer_types[i] for i in layers]
    from transformers import AutoModelForCausalLM

    models.quiet_transformers()
    student = AutoModelForCausalLM.from_config(cfg)
    sd = teacher.state_dict()
    new = {}
    for k in student.state_dict():
        if k.startswith("model.layers."):
            i = int(k.split(".")[2])
            new[k] = sd[k.replace(f"model.layers.{i}.", f"model.layers.{layers[i]}.", 1)].clone()
        else:
            new[k] = sd[k].clone()
    student.load_state_dict(new)
    return student


def freeze_embeddings(model):
    """Keep the (tied) embeddings and head at the teacher's: they are half of the student's weights."""
    model.get_input_embeddings().weight.requires_grad_(False)
    model.get_output_embeddings().weight.requires_grad_(False)
    return model


def recover(teacher, teacher_id: str, params: dict, *, progress: bool = True) -> dict:
    """The recovered student (cached): layer subset of ``teacher``, then language modelling on the corpus.

    Returns ``{"model", "log", "layers", "copied_val_ppl"}``; ``params``: ``student_layers``,
    ``recovery_steps``, ``recovery_batch``, ``recovery_lr``, ``block_size``, ``seed`` and, if present, ``bf16``.
    """
    from acl26 import corpus as corpus_mod

    layers = layer_subset(teacher.config.num_hidden_layers, params["student_layers"])
    corp = corpus_mod.load_corpus("smollm2", block_size=params["block_size"])
    train_x = torch.from_numpy(corp.blocks("train"))
    val_x = torch.from_numpy(corp.blocks("validation"))[:64]

    def init():
        return freeze_embeddings(make_student(teacher, layers))

    copied = init()
    copied_loss = training.evaluate_loss(copied, val_x)
    tc = training.TrainConfig(steps=params["recovery_steps"], batch_size=params["recovery_batch"],
                              lr=params["recovery_lr"], warmup_frac=0.05, min_lr_frac=0.1, weight_decay=0.0,
                              seed=params["seed"], eval_every=max(1, params["recovery_steps"] // 5), eval_blocks=32,
                              checkpoint_every=50, bf16=bool(params.get("bf16", False)))
    fp = D.digest({"train": D.digest(train_x[:4].tolist()), "n": len(train_x), "corpus": corp.key})
    res = training.train(copied.config, tc, train_x, val_x, name="mta-student", data_fingerprint=fp, init=init,
                         key_extra={"teacher": teacher_id, "layers": layers, "frozen": "embeddings and head",
                                    "task": "mta student recovery v1"}, progress=progress)
    return {"model": freeze_embeddings(res.model), "log": res.log, "layers": layers, "folder": str(res.folder),
            "copied_val_ppl": math.exp(copied_loss), "from_cache": res.from_cache}


# --------------------------------------------------------------------------------------------
# the distillation loop


@dataclass(frozen=True)
class Condition:
    """One distillation condition: a base loss, and which MTA terms (if any) are added."""

    base: str = "sfkl"
    dsa: bool = False
    hid: bool = False
    #: which units each key layer pools: "paper" (words at the word layer, phrases above),
    #: "word" (words at every key layer) or "phrase" (phrases at every key layer)
    units: str = "paper"
    importance: bool = True
    lambda_dsa: float = 2.0
    lambda_hid: float = 0.2

    def __post_init__(self):
        if self.base not in L.BASE_LOSSES:
            raise ValueError(f"base must be one of {sorted(L.BASE_LOSSES)}, got {self.base!r}")
        if self.units not in ("paper", "word", "phrase"):
            raise ValueError(f"units must be 'paper', 'word' or 'phrase', got {self.units!r}")
        for name in ("lambda_dsa", "lambda_hid"):
            v = getattr(self, name)
            f = checks.number(name, v, 0.0)
            if not isinstance(v, (int, float)):  # a numpy scalar: stored as a float (the cache key is JSON)
                object.__setattr__(self, name, f)

    @property
    def mta(self) -> bool:
        return self.dsa or self.hid


@dataclass(frozen=True)
class DistillConfig:
    steps: int
    batch_size: int = 8
    lr: float = 2e-4
    warmup_frac: float = 0.1
    min_lr_frac: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    #: bf16 autocast for the student's forward (fp32 master weights, optimizer and losses) where the
    #: device computes bf16 natively (:func:`acl26.training.bf16_native_on`), else fp32 with a warning;
    #: the key records which ran
    bf16: bool = False


@dataclass
class Distilled:
    model: object
    log: dict
    from_cache: bool
    folder: object = None
    extra: dict = field(default_factory=dict)


class Setup:
    """What every condition shares: the start student, the encoded pairs, the teacher cache, the key layers."""

    def __init__(self, student, student_id: str, items: Sequence[D.Encoded], cache: D.TeacherCache,
                 key: dict[str, list[int]], pad_id: int):
        self.student, self.student_id, self.items, self.cache, self.key, self.pad_id = \
            student, student_id, list(items), cache, key, pad_id
        self.student_layers = key["word"] + [x for x in key["phrase"] if x not in key["word"]]
        if len(self.student_layers) != len(cache.layers):
            raise ValueError(f"{len(self.student_layers)} student key layers but {len(cache.layers)} cached teacher layers")

    def batch(self, idx: Sequence[int]) -> dict:
        chosen = [self.items[int(i)] for i in idx]
        b = D.pad_batch(chosen, self.pad_id)
        b.update(self.cache.batch(idx, b["ids"].shape[1]))
        b["items"] = chosen
        return b


def loss_terms(model, projs: torch.nn.ModuleList, b: dict, cond: Condition, setup: Setup, *,
               bf16: bool = False) -> dict[str, torch.Tensor]:
    """The base loss and the MTA terms of one batch (``loss`` is their weighted sum).

    ``bf16``: the student's forward (its blocks and head) under bf16 autocast; the losses, the
    projections and the states they read are float32 either way."""
    dev = next(model.parameters()).device
    b = {k: v.to(dev) if isinstance(v, torch.Tensor) else v for k, v in b.items()}
    attn = b["attn"]
    content = b["content"] & attn
    pos = D.predict_mask(b["labels"]) & attn
    with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bool(bf16)):
        out = model.base_model(input_ids=b["ids"], attention_mask=attn.long(), output_hidden_states=cond.mta)
        logits = model.get_output_embeddings()(out.last_hidden_state[pos])
    logits = logits.float()
    s_b, t_b = L.topk_buckets(logits, b["topk_idx"][pos], b["topk_logp"][pos])
    base = L.BASE_LOSSES[cond.base](s_b, t_b)
    terms = {"base": base}
    total = base
    if cond.mta:
        dsa = torch.zeros((), device=dev)
        hid = torch.zeros((), device=dev)
        for j, layer in enumerate(setup.student_layers):
            th = b["hidden"][:, :, j]
            w = L.token_importance(th, content) if cond.importance else L.uniform_importance(content)
            sh = out.hidden_states[layer].float()
            if cond.dsa:
                kind = ("words" if layer in setup.key["word"] else "phrases") if cond.units == "paper" else \
                    ("words" if cond.units == "word" else "phrases")
                spans = [getattr(e, kind) for e in b["items"]]
                member = L.span_matrix(spans, max([len(s) for s in spans] + [1]), th.shape[1]).to(dev)
                us, uw = L.pool_spans(sh, w, member)
                ut, _ = L.pool_spans(th, w, member)
                dsa = dsa + L.dsa_loss(us, ut, uw)
            if cond.hid:
                hid = hid + L.hid_loss(sh, th, w, projs[j])
        dsa = dsa / len(setup.student_layers)  # DSA: averaged over key layers; Hid: summed (the paper's forms)
        terms.update({k: v for k, v in (("dsa", dsa), ("hid", hid)) if getattr(cond, k)})
        total = total + cond.lambda_dsa * dsa * cond.dsa + cond.lambda_hid * hid * cond.hid
    terms["loss"] = total
    return terms


def _key(setup: Setup, cond: Condition, cfg: DistillConfig) -> str:
    c = asdict(cfg)
    if c.pop("bf16"):  # an fp32 run keeps the key it had before the field existed
        c["bf16"] = training.precision_tag(True, next(setup.student.parameters()).device)
    return D.digest({"student": setup.student_id, "items": D.encoded_digest(setup.items), "cache": setup.cache.meta["key"],
                     "key_layers": setup.key, "cond": asdict(cond), "cfg": c, "v": DISTILL_VERSION,
                     "torch": torch.__version__.split("+")[0], **_device_key(setup.student)})


def _config_of(model) -> dict:
    """The model's config without what changes when the same weights are saved and loaded again (its path,
    the transformers version, the dtype fields), so a trained model and its cached copy share their keys."""
    cfg = model.config.to_dict()
    for volatile in ("_name_or_path", "transformers_version", "dtype", "torch_dtype"):
        cfg.pop(volatile, None)
    return cfg


def _device_key(model) -> dict:
    """The device in a cache key where it is not the CPU (CPU keys stay as they were)."""
    dev = next(model.parameters()).device
    return {} if dev.type == "cpu" else {"device": str(dev)}


def distill(setup: Setup, cond: Condition, cfg: DistillConfig, *, name: str, progress: bool = True,
            use_cache: bool = True) -> Distilled:
    """Train one condition from the start student (cached under ``$ACL26_CACHE/models/mta-<name>-<key>``)."""
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM

    checks.integer("steps", cfg.steps, 1)
    checks.integer("batch_size", cfg.batch_size, 1)
    key = _key(setup, cond, cfg)
    folder = paths.cache_dir() / "models" / f"mta-{name}-{key[:12]}"
    dev = next(setup.student.parameters()).device
    # one process at a time per condition (points of a sweep on a shared cache never distill it twice)
    with io.file_lock(folder.parent / f".{folder.name}.lock", what=f"distilling {name!r}"):
        if use_cache and (folder / "distill_log.json").is_file():
            from acl26.errors import cache_entry_error

            models.quiet_transformers()
            log = io.read_cached_json(folder / "distill_log.json", "distilled student's log")
            try:
                model = AutoModelForCausalLM.from_pretrained(folder).to(dev)
            except Exception as exc:  # noqa: BLE001 - safetensors / json / torch errors alike: a damaged entry
                raise cache_entry_error(folder, exc, what="distilled student") from exc
            model.eval()
            return Distilled(model, log, True, folder)
        io.check_target(folder, kind="folder")  # before the distillation, not after it
        use_bf16 = training.bf16_runs(cfg.bf16, dev)
        if cfg.bf16 and not use_bf16:
            import logging

            logging.getLogger(__name__).warning("distill %s: bf16 autocast asked for, but %s has no native bf16: "
                                                "training in fp32", name, dev)
        with training.deterministic():
            torch.manual_seed(cfg.seed)
            model = freeze_embeddings(copy.deepcopy(setup.student))
            model.train()
            d_s = model.config.hidden_size
            d_t = setup.cache.meta["hidden_size"]
            projs = torch.nn.ModuleList([L.projection(d_s, d_t) for _ in setup.student_layers]).to(dev)
            params = [p for p in model.parameters() if p.requires_grad] + (list(projs.parameters()) if cond.hid else [])
            opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
            tc = training.TrainConfig(steps=cfg.steps, lr=cfg.lr, warmup_frac=cfg.warmup_frac, min_lr_frac=cfg.min_lr_frac)
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: training.lr_at(s, tc))
            gen = torch.Generator().manual_seed(cfg.seed)
            hist = {"step": [], "loss": [], "base": [], "dsa": [], "hid": [], "seconds": []}
            t0 = time.perf_counter()
            for step in tqdm(range(cfg.steps), desc=f"distill {name}", unit="step", disable=not progress):
                ts = time.perf_counter()
                idx = torch.randint(0, len(setup.items), (cfg.batch_size,), generator=gen).tolist()
                terms = loss_terms(model, projs, setup.batch(idx), cond, setup, bf16=use_bf16)
                terms["loss"].backward()
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                hist["step"].append(step + 1)
                for k in ("loss", "base", "dsa", "hid"):
                    hist[k].append(float(terms[k]) if k in terms else None)
                hist["seconds"].append(time.perf_counter() - ts)
            seconds = time.perf_counter() - t0
        model.eval()
        log = {"name": name, "key": key, "condition": asdict(cond), "config": asdict(cfg), "history": hist,
               "seconds": round(seconds, 1), "start": setup.student_id,
               "precision": "bf16 autocast" if use_bf16 else "fp32"}
        with io.atomic_dir(folder) as tmp:
            model.save_pretrained(tmp)
            io.write_json(tmp / "distill_log.json", log)
        return Distilled(model, log, False, folder)


def step_times(setup: Setup, conds: dict[str, Condition], *, batch_size: int, rounds: int, seed: int = 0,
               teacher=None, teacher_layers: Sequence[int] | None = None, bf16: bool = False) -> dict:
    """Seconds per training step of each condition on the same batches, in interleaved rounds whose
    order rotates (:func:`acl26.timing.interleaved`); no weights change.

    A step is the student's forward and backward. With ``teacher`` it also holds the teacher's
    forward on the batch, as a user runs a distillation step: its log-probabilities' top-k (the
    base loss's targets) and, for a condition with MTA terms, its states at ``teacher_layers``
    (the cache's; the losses still read the cached copies, the same numbers). ``bf16``: the
    forwards under bf16 autocast where the device computes bf16 natively, as :func:`distill` runs."""
    from acl26 import timing

    if teacher is not None and teacher_layers is None:
        teacher_layers = setup.cache.layers
    top_k = int(setup.cache.meta["top_k"])

    model = freeze_embeddings(copy.deepcopy(setup.student))
    model.train()
    projs = torch.nn.ModuleList([L.projection(model.config.hidden_size, setup.cache.meta["hidden_size"])
                                 for _ in setup.student_layers]).to(next(model.parameters()).device)
    gen = torch.Generator().manual_seed(seed)
    batch = setup.batch(torch.randint(0, len(setup.items), (batch_size,), generator=gen).tolist())
    use_bf16 = training.bf16_runs(bf16, next(model.parameters()).device)

    def teacher_forward(cond):
        dev = next(teacher.parameters()).device
        with torch.no_grad(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=use_bf16):
            out = teacher(input_ids=batch["ids"].to(dev), attention_mask=batch["attn"].long().to(dev),
                          output_hidden_states=cond.mta)
            torch.log_softmax(out.logits.float(), dim=-1).topk(top_k, dim=-1)
            if cond.mta:
                torch.stack([out.hidden_states[layer].float() for layer in teacher_layers], dim=2)

    def step(cond):
        def f():
            if teacher is not None:
                teacher_forward(cond)
            terms = loss_terms(model, projs, batch, cond, setup, bf16=use_bf16)
            terms["loss"].backward()
            model.zero_grad(set_to_none=True)
            projs.zero_grad(set_to_none=True)
        return f

    return timing.interleaved({k: step(c) for k, c in conds.items()}, rounds=rounds, calls=1, warm_s=0.0)


# --------------------------------------------------------------------------------------------
# evaluation


def _at_reference(model, items: Sequence[D.Encoded], pad_id: int, batch_size: int):
    """Per item, in order, ``(logits, targets)``: ``model``'s float32 logits at every position that predicts
    a token of the reference (or its EOS), ``[n_positions, vocab]``, and those tokens' ids, teacher-forced
    (the model in eval mode meanwhile). Where the forward takes ``logits_to_keep``, the head runs only at the
    columns where some item of the batch has such a position (the same logits: the head is applied row by row)."""
    checks.integer("batch_size", batch_size, 1)
    was = model.training
    model.eval()
    keep = evaluation.keeps_logits(model)
    try:
        dev = next(model.parameters()).device
        for lo in range(0, len(items), batch_size):
            b = {k: v.to(dev) for k, v in D.pad_batch(items[lo:lo + batch_size], pad_id).items()}
            pos = (D.predict_mask(b["labels"]) & b["attn"]).bool()
            targets = torch.zeros_like(b["ids"])
            targets[:, :-1] = b["ids"][:, 1:]
            if keep:  # the columns any row needs (a 1-D logits_to_keep: every transformers 5.x takes it)
                cols = pos.any(0).nonzero().squeeze(-1)
                logits = model(input_ids=b["ids"], attention_mask=b["attn"].long(), logits_to_keep=cols).logits
                pos, targets = pos[:, cols], targets[:, cols]
            else:
                logits = model(input_ids=b["ids"], attention_mask=b["attn"].long()).logits
            logits = logits.float()
            for i in range(logits.shape[0]):
                yield logits[i][pos[i]], targets[i][pos[i]]
    finally:
        model.train(was)


def _kl_row(s_logits: torch.Tensor, s_lp: torch.Tensor, t: torch.Tensor, i: int) -> float:
    """Mean KL(teacher ‖ student) over one pair's positions (both cut to the shared ids and renormalised);
    ``s_lp`` is the log-softmax of ``s_logits``, used as it is where no id is cut."""
    t = t.to(s_logits.device)
    if s_logits.shape[0] != t.shape[0]:
        raise ValueError(f"teacher_lp[{i}] has {t.shape[0]} positions, the item {s_logits.shape[0]}")
    v = min(s_logits.shape[-1], t.shape[-1])
    s = s_lp if v == s_logits.shape[-1] else torch.log_softmax(s_logits[:, :v], -1)
    t = t[:, :v] - torch.logsumexp(t[:, :v], -1, keepdim=True) if v < t.shape[-1] else t
    return float(L.forward_kl(s, t))


@torch.no_grad()
def reference_scores(model, items: Sequence[D.Encoded], pad_id: int, batch_size: int = 16, *,
                     teacher_lp: Sequence[torch.Tensor] | None = None) -> dict[str, list[float]]:
    """One teacher-forced pass of ``model`` over the reference responses: per pair, ``"nll"`` (the mean NLL
    of the reference's tokens and EOS, nats/token) and, with ``teacher_lp`` (:func:`teacher_logprobs` of
    the same items), ``"kl"`` (the mean KL(teacher ‖ student), as :func:`heldout_kl`)."""
    if teacher_lp is not None and len(teacher_lp) != len(items):
        raise ValueError(f"teacher_lp holds {len(teacher_lp)} pairs, not the {len(items)} items")
    nll: list[float] = []
    kl: list[float] = []
    for i, (logits, tgt) in enumerate(_at_reference(model, items, pad_id, batch_size)):
        lp = torch.log_softmax(logits, -1)
        nll.append(float(-lp.gather(-1, tgt[:, None]).mean()) if len(tgt) else 0.0)
        if teacher_lp is not None:
            kl.append(_kl_row(logits, lp, teacher_lp[i], i))
    return {"nll": nll, **({"kl": kl} if teacher_lp is not None else {})}


def response_nll(model, items: Sequence[D.Encoded], pad_id: int, batch_size: int = 16) -> list[float]:
    """Per pair, the mean NLL (nats/token) of the reference's tokens and EOS, teacher-forced."""
    return reference_scores(model, items, pad_id, batch_size)["nll"]


@torch.no_grad()
def teacher_logprobs(teacher, items: Sequence[D.Encoded], pad_id: int, batch_size: int = 16) -> list[torch.Tensor]:
    """Per held-out pair, the teacher's log-probabilities (float32, full vocabulary) at every position that
    predicts a token of the reference (or its EOS): ``[n_positions, vocab]``. Made once, so that
    :func:`heldout_kl` runs only the student for each model it scores."""
    return [torch.log_softmax(x, -1).cpu() for x, _ in _at_reference(teacher, items, pad_id, batch_size)]


def heldout_kl(student, teacher, items: Sequence[D.Encoded], pad_id: int, batch_size: int = 16, *,
               teacher_lp: Sequence[torch.Tensor] | None = None) -> list[float]:
    """Per held-out pair, the mean KL(teacher ‖ student) in nats per token over the full vocabulary, at every
    position that predicts a token of the reference response (or its EOS), teacher-forced on the
    reference: how close distillation brought the student to the teacher where it was trained to be.

    ``teacher_lp``: :func:`teacher_logprobs` of the same items (else made here; ``teacher`` is then not
    run). Where the two output layers differ in size (one padded), both are cut to the shared ids and
    renormalised first."""
    if teacher_lp is None:
        teacher_lp = teacher_logprobs(teacher, items, pad_id, batch_size)
    return reference_scores(student, items, pad_id, batch_size, teacher_lp=teacher_lp)["kl"]


def evaluate(model, tokenizer, pairs: Sequence[D.Pair], items: Sequence[D.Encoded], *, samples: int,
             max_new_tokens: int, seed: int, pad_id: int, batch_size: int = 32, progress: bool = False,
             cache_key: dict | None = None, teacher_lp: Sequence[torch.Tensor] | None = None,
             teacher_key: str | None = None) -> dict:
    """``{"nll": [...], "rouge": [...] (per pair, mean over samples, x100), "texts": [...]}``; cached by
    ``cache_key`` (with the model's weights digest) when given.

    With ``teacher_lp`` (:func:`teacher_logprobs` of ``items``) the record also holds ``"kl"`` (per pair,
    :func:`heldout_kl`), from the same teacher-forced pass as the NLL; ``teacher_key`` names that teacher
    in the cache key (required with ``teacher_lp`` when caching)."""
    if teacher_lp is not None and cache_key is not None and not teacher_key:
        raise ValueError("evaluate: teacher_lp with a cache_key needs a teacher_key (the KL depends on the teacher)")
    path = None
    if cache_key is not None:
        ck = {**cache_key, "kl_teacher": teacher_key} if teacher_lp is not None else cache_key
        path = eval_path(model, tokenizer, pairs, items, samples=samples, max_new_tokens=max_new_tokens, seed=seed,
                         batch_size=batch_size, cache_key=ck)
        if path.is_file():
            return io.read_cached_json(path, "cached evaluation")
    t0 = time.perf_counter()
    scores = reference_scores(model, items, pad_id, teacher_lp=teacher_lp)
    gens = sample_responses(model, tokenizer, pairs, samples=samples, max_new_tokens=max_new_tokens, seed=seed,
                            batch_size=batch_size, progress=progress)
    refs = [p.reference for p in pairs]
    per = np.zeros(len(pairs))
    for j in range(samples):
        per += np.asarray(evaluation.rouge_l_scores([row[j] for row in gens], refs))
    rec = {**scores, "rouge": (100.0 * per / samples).tolist(), "texts": [row[0] for row in gens],
           "sources": [p.source for p in pairs], "seconds": round(time.perf_counter() - t0, 1)}
    if path is not None:
        io.write_json(path, rec)
    return rec


#: what samples the evaluation's responses (in its cache key): :func:`acl26.rollout.rollouts`, one prefill per
#: prompt for all its samples (it replaced ``transformers``' ``generate``, which prefilled each sample apart);
#: v2: a token drawn by :func:`acl26.rollout.draw` (one uniform number per row), not ``torch.multinomial``
SAMPLER = "acl26.rollout v2"


def sample_responses(model, tokenizer, pairs: Sequence[D.Pair], *, samples: int, max_new_tokens: int, seed: int,
                     batch_size: int, progress: bool = False) -> list[list[str]]:
    """``samples`` responses per pair's prompt (chat-formatted with the system prompt, :func:`.data.prompt_text`),
    sampled at T = 1 from the whole distribution (no top-k, no top-p) until an EOS (the tokenizer's or the
    model's) or ``max_new_tokens``; ``batch_size`` sequences per batch (``batch_size // samples`` prompts,
    at least one). ``[pair][sample]`` texts, special tokens left out."""
    from acl26 import rollout

    checks.integer("samples", samples, 1)
    checks.integer("batch_size", batch_size, 1)
    prompts = [D.prompt_text(tokenizer, p.prompt) for p in pairs]
    ro = rollout.rollouts(model, tokenizer, prompts, k=samples, max_new_tokens=max_new_tokens, temperature=1.0,
                          top_p=None, top_k=None, seed=seed, batch_prompts=max(1, batch_size // samples),
                          eos_token_id=evaluation.eos_ids(model, tokenizer, None), progress=progress)
    return ro.texts


def eval_path(model, tokenizer, pairs: Sequence[D.Pair], items: Sequence[D.Encoded], *, samples: int,
              max_new_tokens: int, seed: int, batch_size: int, cache_key: dict, config: dict | None = None):
    """Where :func:`evaluate` caches its record: keyed by everything that changes it (weights, config,
    pairs and their encoding, decoding, the chat template, the device)."""
    key = D.digest({**cache_key, "model": D.state_digest(model), "config": config if config is not None else _config_of(model),
                    "samples": samples, "mnt": max_new_tokens, "seed": seed, "batch_size": batch_size,
                    "pairs": [(p.prompt, p.reference) for p in pairs], "items": D.encoded_digest(items),
                    "template": getattr(tokenizer, "chat_template", None), "v": DISTILL_VERSION, "sampler": SAMPLER,
                    **_device_key(model)})
    return paths.cache_dir() / "mta" / f"eval-{key[:20]}.json"
