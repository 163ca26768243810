"""MTA's losses: the base KD losses, token importance, span pooling, DSA and Hid.

Shapes: ``B`` sequences, ``T`` positions, ``V`` vocabulary (or the top-k + 1 buckets of
:func:`topk_buckets`), ``d`` hidden size, ``K`` units.

**Base KD losses** take log-probabilities (``student_logp``, ``teacher_logp``, both ``[..., V]``)
and a boolean ``mask`` over the leading dimensions (the positions with labels); each returns the
mean over masked positions. :func:`forward_kl` is KL(p‖q); :func:`skew_forward_kl` and
:func:`skew_reverse_kl` are DistiLLM's (Ko et al., 2024), written as its code computes them:

* skew forward KL: mix = α·p + (1−α)·q, loss = −Σ p·log mix (DistiLLM omits p's entropy, a
  constant for the student, so the value is a cross-entropy; the gradient is the skew KL's);
* skew reverse KL: mix = (1−α)·p + α·q, loss = Σ q·(log q − log mix).

With teacher logits cached as their top-k only, :func:`topk_buckets` turns both distributions
into k + 1 buckets: the teacher's k most likely tokens and "the rest". Both sides are exact
probabilities of the same k + 1 events, so each loss is the loss between two coarser
distributions (exact when k = V).

**Non-finite input.** A log-probability may be −∞ (a token of probability 0). The teacher's
log-probabilities (``teacher_logp``, ``topk_logp``: cached data, checked in one reduction each)
raise a ``ValueError`` naming them when they hold NaN or +∞ at a position that enters; everything
from the student (log-probabilities, logits, states) and the MTA terms' inputs propagate NaN (or
±∞), so a diverged student gives a NaN loss, never a finite one. Masked-out positions do not enter.

**MTA** (the paper's §3): :func:`token_importance` from teacher states, :func:`pool_spans` into
word or phrase units, :func:`dsa_loss` (Dynamic Structural Alignment, summed over i ≠ j) on the units' pairwise
cosine distances and :func:`hid_loss` (Hidden Representation Alignment) on projected states.
:func:`key_layers` and :func:`teacher_layer` place them in depth.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from acl26 import checks

#: DistiLLM's skew coefficient
ALPHA = 0.1


def _masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mean of ``x`` over the masked positions (0 when there are none); masked-out values do not enter."""
    if mask is None:
        return x.mean() if x.numel() else x.sum()
    m = mask.bool()
    return torch.where(m, x, torch.zeros_like(x)).sum() / m.sum().clamp_min(1).to(x.dtype)


def _finite(logp: torch.Tensor) -> torch.Tensor:
    """Log-probabilities with −inf (a token of probability 0) replaced by a large finite negative, so
    that no gradient of the losses below is NaN; the values change by less than exp(−1e30). NaN stays
    NaN and +inf (never a log-probability) becomes NaN, so that either gives a NaN loss."""
    x = logp.clamp_min(-1e30) if logp.dtype == torch.float64 else logp.clamp_min(torch.finfo(logp.dtype).min / 4)
    return x.masked_fill(x == math.inf, math.nan)


def _check_logp(name: str, logp: torch.Tensor, mask: torch.Tensor | None = None) -> None:
    """Refuse NaN and +inf in ``logp`` (−inf, probability 0, is fine) where ``mask`` (over the leading
    dimensions) is True; one reduction."""
    ok = logp < math.inf  # False for NaN and +inf
    if mask is not None:
        ok = ok | ~mask.bool()[..., None]
    if not bool(ok.all()):
        raise ValueError(f"{name} holds NaN or +inf")


def _check(student_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor | None) -> None:
    if student_logp.shape != teacher_logp.shape:
        raise ValueError(f"student_logp {tuple(student_logp.shape)} and teacher_logp {tuple(teacher_logp.shape)} differ")
    if mask is not None and tuple(mask.shape) != tuple(student_logp.shape[:-1]):
        raise ValueError(f"mask must have shape {tuple(student_logp.shape[:-1])}, got {tuple(mask.shape)}")
    _check_logp("teacher_logp", teacher_logp, mask)


def _xlogy(p: torch.Tensor, logx: torch.Tensor) -> torch.Tensor:
    """p·log x with 0·log x = 0 for any finite log x (and finite gradients); NaN in ``p`` or ``logx``
    gives NaN (``p > 0`` would hide a NaN ``p``, and ``p == 0`` a NaN ``logx``)."""
    live = (p != 0) | torch.isnan(logx)
    return torch.where(live, p * torch.where(live, logx, torch.zeros_like(logx)), torch.zeros_like(p))


def forward_kl(student_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """KL(p_teacher ‖ q_student) = Σ p (log p − log q), mean over masked positions.

    ``teacher_logp`` holding NaN or +inf (at a masked position) raises; NaN or +inf in
    ``student_logp`` gives NaN."""
    _check(student_logp, teacher_logp, mask)
    student_logp, teacher_logp = _finite(student_logp), _finite(teacher_logp)
    p = teacher_logp.exp()
    kl = (_xlogy(p, teacher_logp) - _xlogy(p, student_logp)).sum(-1)
    return _masked_mean(kl, mask)


def skew_forward_kl(student_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor | None = None,
                    alpha: float = ALPHA) -> torch.Tensor:
    """DistiLLM's skew forward KL: −Σ p·log(α·p + (1−α)·q), mean over masked positions (non-finite
    input: as :func:`forward_kl`)."""
    _check(student_logp, teacher_logp, mask)
    alpha = _alpha(alpha)
    student_logp, teacher_logp = _finite(student_logp), _finite(teacher_logp)
    p = teacher_logp.exp()
    log_mix = torch.logaddexp(teacher_logp + math.log(alpha), student_logp + math.log1p(-alpha))
    return _masked_mean(-_xlogy(p, log_mix).sum(-1), mask)


def skew_reverse_kl(student_logp: torch.Tensor, teacher_logp: torch.Tensor, mask: torch.Tensor | None = None,
                    alpha: float = ALPHA) -> torch.Tensor:
    """DistiLLM's skew reverse KL: Σ q·(log q − log((1−α)·p + α·q)), mean over masked positions (non-finite
    input: as :func:`forward_kl`)."""
    _check(student_logp, teacher_logp, mask)
    alpha = _alpha(alpha)
    student_logp, teacher_logp = _finite(student_logp), _finite(teacher_logp)
    q = student_logp.exp()
    log_mix = torch.logaddexp(teacher_logp + math.log1p(-alpha), student_logp + math.log(alpha))
    return _masked_mean((_xlogy(q, student_logp) - _xlogy(q, log_mix)).sum(-1), mask)


def _alpha(alpha: float) -> float:
    return checks.number("alpha", alpha, 0.0, 1.0, lo_open=True, hi_open=True)


#: the base losses by name (the notebook's ``base_losses`` parameter)
BASE_LOSSES = {"fkl": forward_kl, "sfkl": skew_forward_kl, "srkl": skew_reverse_kl}
BASE_NAMES = {"fkl": "forward KL", "sfkl": "skew forward KL (DistiLLM)", "srkl": "skew reverse KL (DistiLLM)"}


def topk_buckets(student_logits: torch.Tensor, topk_idx: torch.Tensor,
                 topk_logp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Student and teacher log-probabilities over k + 1 buckets: the teacher's top-k tokens, then the rest.

    ``student_logits`` ``[..., V]``; ``topk_idx`` ``[..., k]`` (long) and ``topk_logp`` ``[..., k]``
    the teacher's top-k token ids and their exact log-probabilities (log-softmax over the full
    vocabulary). The rest bucket holds 1 − Σ top-k probability on each side. ``topk_logp`` holding
    NaN or +inf raises (−inf, probability 0, is fine); non-finite ``student_logits`` give NaN.
    """
    if topk_idx.shape != topk_logp.shape or topk_idx.shape[:-1] != student_logits.shape[:-1]:
        raise ValueError(f"topk_idx {tuple(topk_idx.shape)}, topk_logp {tuple(topk_logp.shape)} and "
                         f"student_logits {tuple(student_logits.shape)} do not match")
    _check_logp("topk_logp", topk_logp)
    s_logp = torch.log_softmax(student_logits.float(), dim=-1)
    s_top = s_logp.gather(-1, topk_idx)
    t_top = topk_logp.float()
    s_rest = _log1mexp(torch.logsumexp(s_top, -1, keepdim=True))
    # a NaN or +inf logit outside the top-k makes its row NaN, not a finite bucket (no host sync)
    s_rest = s_rest.masked_fill(torch.isnan(s_logp).any(-1, keepdim=True), math.nan)
    return (torch.cat([s_top, s_rest], -1),
            torch.cat([t_top, _log1mexp(torch.logsumexp(t_top, -1, keepdim=True))], -1))


def _log1mexp(x: torch.Tensor) -> torch.Tensor:
    """log(1 − exp(x)) for x ≤ 0, stable and with finite gradients; x is capped at −1e-12, so a bucket
    that holds (numerically) no mass gets log 1e-12 rather than −inf."""
    x = x.clamp(max=-1e-12)
    near = torch.log(-torch.expm1(x.clamp(min=-math.log(2))))
    far = torch.log1p(-torch.exp(x.clamp(max=-math.log(2))))
    return torch.where(x > -math.log(2), near, far)


# --------------------------------------------------------------------------------------------
# MTA


def token_importance(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token weights from (teacher) states: ``hidden`` ``[B, T, d]``, ``mask`` ``[B, T]`` (True = token).

    Ĥ = H / std(H), with the std over every entry of the sequence's tokens (a scalar per sequence);
    S = ĤĤᵀ/√d with the diagonal and padding set to −∞; α = softmax over each row; w_t = the
    column mean of α over the sequence's N tokens. Returns ``[B, T]``: ≥ 0, zero on padding, sum 1
    per sequence with at least one token (a one-token sequence gives that token weight 1), and the
    same when H is multiplied by a constant. Computed in float32 without gradient.
    """
    if hidden.ndim != 3 or mask.shape != hidden.shape[:2]:
        raise ValueError(f"hidden must be [B, T, d] and mask [B, T], got {tuple(hidden.shape)} and {tuple(mask.shape)}")
    with torch.no_grad():
        m = mask.bool()
        h = hidden.detach().float().masked_fill(~m[..., None], 0.0)
        if not torch.isfinite(h).all():
            raise ValueError("hidden has non-finite values on tokens of the mask")
        n = m.sum(-1)  # [B]
        mf = m.float()[..., None]
        count = (n.float() * h.shape[-1]).clamp_min(1)
        mean = (h * mf).sum((1, 2)) / count
        var = (((h - mean[:, None, None]) ** 2) * mf).sum((1, 2)) / count
        std = var.sqrt().clamp_min(1e-12)
        hn = h / std[:, None, None]
        s = hn @ hn.transpose(1, 2) / math.sqrt(h.shape[-1])  # [B, T, T]
        eye = torch.eye(h.shape[1], dtype=torch.bool, device=h.device)
        blocked = eye[None] | ~m[:, None, :]
        s = s.masked_fill(blocked, -math.inf)
        live = (~blocked).any(-1, keepdim=True)  # rows with something to attend to (not one-token sequences)
        alpha = torch.where(live, torch.softmax(s.masked_fill(~live, 0.0), dim=-1), torch.zeros_like(s))
        alpha = alpha * m[:, :, None]  # padding rows do not vote
        w = alpha.sum(1) / n.clamp_min(1)[:, None].float()
        one = (n == 1)
        if one.any():
            w[one] = m[one].float()
        return w * m


def uniform_importance(mask: torch.Tensor) -> torch.Tensor:
    """Equal weights over each sequence's tokens (the "no importance weights" ablation)."""
    m = mask.float()
    return m / m.sum(-1, keepdim=True).clamp_min(1)


def span_matrix(spans: Sequence[Sequence[tuple[int, int]]], n_units: int, length: int) -> torch.Tensor:
    """``[B, K, T]`` 0/1 membership of token t in span k (``(start, end)``, end exclusive) of sequence b."""
    n_units = checks.integer("n_units", n_units, 0)
    length = checks.integer("length", length, 0)
    out = torch.zeros(len(spans), n_units, length)
    for b, seq in enumerate(spans):
        if len(seq) > n_units:
            raise ValueError(f"sequence {b} has {len(seq)} spans, more than n_units={n_units}")
        for k, (s, e) in enumerate(seq):
            s, e = checks.integer(f"spans[{b}][{k}] start", s), checks.integer(f"spans[{b}][{k}] end", e)
            if not 0 <= s < e <= length:
                raise ValueError(f"span {(s, e)} of sequence {b} is empty or outside [0, {length})")
            out[b, k, s:e] = 1.0
    return out


def pool_spans(hidden: torch.Tensor, weights: torch.Tensor,
               spans: Sequence[Sequence[tuple[int, int]]] | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Units U_k = Σ_{t∈k} w_t H_t / Σ_{t∈k} w_t and their weights (summed token weight, normalised).

    ``hidden`` ``[B, T, d]``, ``weights`` ``[B, T]``, ``spans`` one list of ``(start, end)`` token
    ranges per sequence (or a ready ``[B, K, T]`` membership matrix). Returns ``units`` ``[B, K, d]``
    and ``unit_weights`` ``[B, K]`` (zero for the padding units of shorter lists; each row sums to 1
    where any unit has weight). A span whose tokens all have weight 0 gets the plain mean of its
    tokens and unit weight 0. NaN or ±inf in ``hidden`` or ``weights`` gives NaN (or ±inf) units or
    unit weights.
    """
    if hidden.ndim != 3 or weights.shape != hidden.shape[:2]:
        raise ValueError(f"hidden must be [B, T, d] and weights [B, T], got {tuple(hidden.shape)}, {tuple(weights.shape)}")
    if isinstance(spans, torch.Tensor):
        if spans.ndim != 3 or spans.shape[0] != hidden.shape[0] or spans.shape[2] != hidden.shape[1]:
            raise ValueError(f"a membership matrix must be [B, K, T] = [{hidden.shape[0]}, K, {hidden.shape[1]}], "
                             f"got {tuple(spans.shape)}")
        member = spans.to(hidden.dtype)
    else:
        if len(spans) != hidden.shape[0]:
            raise ValueError(f"need one span list per sequence ({hidden.shape[0]}), got {len(spans)}")
        member = span_matrix(spans, max([len(s) for s in spans] + [1]), hidden.shape[1]).to(hidden.dtype)
    w = weights.to(hidden.dtype)
    mw = member * w[:, None, :]  # [B, K, T]
    mass = mw.sum(-1)  # [B, K]
    size = member.sum(-1)
    fallback = (mass <= 0) & (mass > -math.inf)  # a span of −inf (or NaN) weight is no weightless span: NaN out
    num = torch.where(fallback[..., None], member, mw)
    den = torch.where(fallback, size, mass).clamp_min(1e-12)
    units = (num @ hidden) / den[..., None]
    unit_w = mass / mass.sum(-1, keepdim=True).clamp_min(1e-12)
    return units, unit_w


def cosine_distances(units: torch.Tensor) -> torch.Tensor:
    """``[B, K, K]`` pairwise 1 − cos of ``units`` ``[B, K, d]``."""
    u = F.normalize(units.float(), dim=-1, eps=1e-8)
    return 1.0 - u @ u.transpose(1, 2)


def dsa_loss(student_units: torch.Tensor, teacher_units: torch.Tensor, unit_weights: torch.Tensor) -> torch.Tensor:
    """Dynamic Structural Alignment: Σ_{i≠j} w_i w_j (d(U^S_i, U^S_j) − d(U^T_i, U^T_j))², d = 1 − cos.

    The paper's form (§3, the DSA loss, as ``../shared/papers/mta.md`` records it; the paper has no
    official code to read it against): the sum runs over ordered pairs i ≠ j, so each unordered pair
    counts twice, i.e. twice Σ_{i<j}. The paper's λ_DSA (2 for GPT-2 and Qwen) weighs this sum, so the
    chapter keeps λ_DSA = 2 with it (until DISTILL_VERSION 3 the sum ran over i < j: half the term, an
    effective λ_DSA of 1). The diagonal is left out explicitly (it is 0 except for a zero unit).

    ``[B, K, d_S]``, ``[B, K, d_T]`` (the sizes may differ: only each side's own geometry enters),
    ``unit_weights`` ``[B, K]``. Mean over the batch. The teacher side is detached, so the gradient
    reaches the student only. NaN or ±inf in any input gives a NaN (or infinite) loss.
    """
    if student_units.ndim != 3 or teacher_units.shape[:2] != student_units.shape[:2] \
            or unit_weights.shape != student_units.shape[:2]:
        raise ValueError(f"student_units {tuple(student_units.shape)}, teacher_units {tuple(teacher_units.shape)} "
                         f"and unit_weights {tuple(unit_weights.shape)} do not match")
    ds = cosine_distances(student_units)
    dt = cosine_distances(teacher_units.detach())
    w = unit_weights.detach().float()
    pair = w[:, :, None] * w[:, None, :]
    off = ~torch.eye(ds.shape[-1], dtype=torch.bool, device=ds.device)  # every ordered pair i ≠ j
    return ((pair * (ds - dt) ** 2) * off).sum((1, 2)).mean()


def hid_loss(student_hidden: torch.Tensor, teacher_hidden: torch.Tensor, weights: torch.Tensor,
             proj: torch.nn.Module) -> torch.Tensor:
    """Hidden Representation Alignment: Σ_t w_t (1 − cos(W h^S_t, h^T_t)), mean over the batch.

    ``proj`` is the layer's bias-free ``Linear(d_S, d_T)``; ``weights`` ``[B, T]`` (zero on padding).
    NaN or ±inf in any input gives a NaN (or infinite) loss.
    """
    if student_hidden.shape[:2] != teacher_hidden.shape[:2] or weights.shape != student_hidden.shape[:2]:
        raise ValueError(f"student_hidden {tuple(student_hidden.shape)}, teacher_hidden {tuple(teacher_hidden.shape)} "
                         f"and weights {tuple(weights.shape)} do not match")
    cos = F.cosine_similarity(proj(student_hidden.float()), teacher_hidden.detach().float(), dim=-1, eps=1e-8)
    return (weights.detach().float() * (1.0 - cos)).sum(-1).mean()


def projection(d_student: int, d_teacher: int) -> torch.nn.Linear:
    """A bias-free ``Linear(d_S, d_T)``; the identity when the sizes agree (our student's states start
    in the teacher's basis: its layers are the teacher's), else PyTorch's default initialisation."""
    lin = torch.nn.Linear(d_student, d_teacher, bias=False)
    if d_student == d_teacher:
        with torch.no_grad():
            lin.weight.copy_(torch.eye(d_student))
    return lin


def key_layers(n_student: int) -> dict[str, list[int]]:
    """The student's key layers (``hidden_states`` indices, 1 = after the first block), the paper's
    GPT-2 setting scaled by depth: words at half depth, phrases at three quarters and at the top
    (12 layers: word 6, phrase 9 and 12)."""
    n_student = checks.integer("n_student", n_student, 1)
    at = [max(1, math.floor(n_student * f + 0.5)) for f in (0.5, 0.75, 1.0)]
    word = [at[0]]
    phrase = sorted({x for x in at[1:] if x != at[0]}) or [n_student]
    return {"word": word, "phrase": phrase}


def teacher_layer(l_student: int, n_student: int, n_teacher: int) -> int:
    """The paper's map from student layer l_S to teacher layer ⌊l_S · N_T / N_S⌋."""
    n_student = checks.integer("n_student", n_student, 1)
    n_teacher = checks.integer("n_teacher", n_teacher, 1)
    l_student = checks.integer("l_student", l_student, 0)
    if not l_student <= n_student:
        raise ValueError(f"l_student must be in [0, n_student={n_student}], got {l_student}")
    return (l_student * n_teacher) // n_student
