"""Alloc-MoE chapter (ACL 2026, arXiv 2604.08133): its parameters and its claims, fixed before any run.

:data:`SPEC` (the notebook's parameters, profiles and cross-parameter checks) and :data:`CLAIMS`
(each claim with the paper's figure and the test that decides it, the controls first). The
experiments are :mod:`.study`, the verdicts :mod:`.verdicts`, the benchmarks :mod:`.bench`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from acl26 import claims as C
from acl26 import io
from acl26 import zoo
from acl26.checks import SEED_MAX
from acl26.params import Param, ParamSpec, folder_with

CALIB_SOURCES = ("sotu", "shakespeare", "moby-dick")
#: SmolLM2-135M's shape, for checking the MoEfication parameters before it loads
SMOLLM2_MLP_WIDTH, SMOLLM2_LAYERS = 1536, 30


def native_top_k(params: dict) -> int | None:
    """The main subject's native top-k where it is known before any model loads: a ``checkpoint``'s
    ``num_experts_per_tok``. None for the MoEfied SmolLM2 (its K_orig is chosen on validation text at
    run time, :func:`acl26.papers.alloc_moe.study.choose_native_k`, which then checks the budgets) and
    for a checkpoint whose config.json does not say."""
    if not params["checkpoint"]:
        return None
    try:
        k = io.read_json(Path(params["checkpoint"]) / "config.json", max_bytes=1 << 20).get("num_experts_per_tok")
    except (OSError, ValueError, AttributeError):
        return None
    return k if isinstance(k, int) and not isinstance(k, bool) and k >= 1 else None


def shared_top_k(params: dict) -> int:
    """The trained MoE's (the second subject's) native top-k: ``moe_top_k`` of ``models_profile``."""
    return int(zoo.SPEC.resolve(params["models_profile"])["moe_top_k"])


#: the one rule on ``budgets`` against a subject's native top-k (a budget must cut something), in one message
#: wherever it is checked: by :data:`SPEC` before any run, and by the study once a subject's top-k is known
BELOW_NATIVE = "budgets must each be below the native top-k"


def below_native(budgets: Sequence[int], native: int | None) -> bool:
    """Whether every budget is below ``native`` (a subject's native top-k; None: not known yet, passes)."""
    return native is None or max(budgets, default=0) < native


def check_below_native(budgets: Sequence[int], native: int, subject: str, why: str = "") -> None:
    """Raise ValueError unless every budget is below ``native``, the native top-k of ``subject`` (``why``:
    how it was chosen): :data:`BELOW_NATIVE`, that top-k and the budgets, in the form :data:`SPEC`'s
    error takes (``... (got budgets=[...])``), one line."""
    if not below_native(budgets, native):
        raise ValueError(f"{BELOW_NATIVE} ({subject}: {native}{', ' + why if why else ''}) "
                         f"(got budgets={list(budgets)!r})")


def _budgets_below_native(p: dict) -> bool:
    return below_native(p["budgets"], shared_top_k(p)) and below_native(p["budgets"], native_top_k(p))


def _k_base_sweep_reaches_half(p: dict) -> bool:
    """The notebook's K_base table needs a swept value at or below the half budget (run_grid skips the rest).
    Where the main subject's native top-k is known only at run time (MoEfied SmolLM2), it is at least
    max(budgets) + 1 (the run refuses less), and the half budget grows with it: checked at that least one."""
    native = native_top_k(p) or max(p["budgets"]) + 1
    return min(p["k_base_sweep"]) <= nearest_half(p["budgets"], native)


def nearest_half(budgets: Sequence[int], native: int) -> int:
    """The half budget (:func:`half_budget`): the one of ``budgets`` nearest ``native / 2``, the smaller on a tie."""
    return min(budgets, key=lambda k: (abs(k - native / 2), k))


_SHARED_TOP_K = ", ".join(f"{prof} {zoo.SPEC.resolve(prof)['moe_top_k']}" for prof in ("smoke", "book", "paper"))


SPEC = ParamSpec(
    paper="alloc_moe",
    params=(
        Param("models_profile", str, "profile of the shared MoE LM (models page)", choices=("smoke", "book", "paper")),
        Param("checkpoint", str, "local folder of a Hugging Face checkpoint to take the place of MoEfied SmolLM2 as the "
              "main subject: a real MoE (DeepSeek-V2-Lite, OLMoE, Qwen1.5-MoE, ...) as it is, or a dense LLaMA-family "
              "model, MoEfied the same way; '' for SmolLM2-135M",
              rule=folder_with("config.json", "tokenizer_config.json"), path=True),
        Param("moefy_experts", int, "MoEfication: routed experts each converted MLP is split into (with moefy_shared, "
              "their sum must divide its width)", min=2),
        # issue 40, point 5: DeepSeek-V2-Lite keeps 2 shared experts always on beside 64 routed ones
        # (../shared/papers/alloc-moe.md); moefy keeps the highest-mass clusters as shared experts
        Param("moefy_shared", int, "MoEfication: always-on shared experts beside the routed ones (the clusters of "
              "largest activation mass, as DeepSeek's); 0 for none", min=0),
        Param("moefy_layers", list, "MoEfication: the decoder layers converted (0 = shallowest); the others stay dense",
              elem=int, min_len=1, min=0),
        Param("moefy_blocks", int, "MoEfication: validation blocks (apart from native_blocks) on which the experts are "
              "clustered and the routers fitted", min=1),
        # 10% (book, issue 40 point 5; 5% before, half the 10% experts_matter asks top-1 to cost): with 16 routed
        # experts K_orig at 5% was 13 of 16, and the profile costs L x K_orig passes; at 10% it is 11, while
        # top-1 still costs 1.62x against it (far above experts_matter's 1.10). See the book profile's comment.
        Param("native_margin", float, "K_orig of the MoEfied subject: the smallest k within this relative perplexity "
              "margin of the dense model", min=0.0),
        Param("native_blocks", int, "validation blocks on which K_orig is chosen (apart from moefy_blocks)", min=1),
        Param("seeds", list, "training seeds of the trained MoE (models page), the second subject's half-budget headline",
              elem=int, min_len=1, min=0, max=SEED_MAX),
        Param("budgets", list, "budgets as uniform-equivalent k (budget = k x layers), each below the native top-k",
              elem=int, min_len=1, min=1),
        Param("eval_blocks", int, "held-out (test split) blocks scored for every method", min=2),
        Param("calib_blocks", int, "calibration blocks (train split of the calibration source) for profiling", min=1),
        Param("calib_source", str, "calibration text of Alloc-L's profile", choices=CALIB_SOURCES),
        Param("calib_alt", str, "second calibration text (calibration-set sensitivity)", choices=CALIB_SOURCES),
        Param("batch_blocks", int, "blocks per forward batch: Alloc-T pools over the batch's tokens", min=1),
        Param("k_base", int, "Alloc-T: experts every token keeps", min=0),
        Param("k_base_sweep", list, "Alloc-T K_base values swept at half budget", elem=int, min_len=1, min=0),
        Param("lexi_samples", int, "LExI-style profile: random inputs per layer", min=1),
        Param("match_iters", int, "bisection steps matching top-p's p and skipping's beta to a budget", min=1),
        Param("match_blocks", int, "calibration blocks on which p and beta are matched to the budget", min=1),
        Param("n_resamples", int, "bootstrap resamples of every interval", min=99),
        Param("speed_shape", str, "MoE layer timed for speed: DeepSeek-V2-Lite's, or a tiny one", choices=("dsv2-lite", "tiny")),
        Param("speed_prefill", int, "prefill tokens timed", min=1),
        Param("speed_rounds", int, "interleaved timing rounds", min=1),
    ),
    profiles={
        # The book's MoEfied subject (issue 40, point 5: a subject in the paper's regime). Chosen before any method ran,
        # on K_orig (choose_native_k on the 8 validation blocks) and the isolated profile's K_orig column
        # (max_i S[i, K_orig] / min_i S[i, K_orig] on the 2 sotu calibration blocks, profile_comparable's figure),
        # layers 10-19, by a short script (not committed) on this machine's 2 cores; no method's verdict was seen:
        #   routed + shared   K_orig at 5% / 10% margin   spread at 5% / 10%   top-1 / native (validation) 5% / 10%
        #   22 + 2            20 / 17 of 22               4.01 / 3.80          6.89 / 6.58
        #   16 + 8            13 / 11 of 16               1.53 / 1.51          1.68 / 1.62
        #   16 + 16           12 / 9 of 16                1.25 / 1.22          1.35 / 1.28   (shared = routed: refused)
        # (the last run's 8 + 0 had K_orig 7 of 8 and rows up to 9x apart.) Two shared experts of 24 clusters leave top-1
        # catastrophic; a third of the MLP shared (16 + 8) brings the rows within 1.6x. K_orig stays above half the
        # routed experts at every margin up to 10% (a MoEfied SwiGLU MLP is not sparse: dropping routed neurons costs
        # perplexity steadily, 16 + 8 at k = 8 is 1.19x dense); 10% keeps K_orig at 11, the profile's L x K_orig passes
        # near the last run's (110 against 70 per profile), and top-1 1.62x the native model. The budgets stay
        # [2, 3, 4, 5]: the second subject (the trained MoE, top-6) takes the same ones, so none may reach 6; on the
        # main subject the half budget is then k = 5 (nearest 11 / 2; 45% of K_orig, as the rows say) and every
        # budget lies below K_orig. The K_base sweep reaches it (uniform top-5 at its top end, 0 at the other).
        "book": dict(models_profile="book", checkpoint="", moefy_experts=16, moefy_shared=8, moefy_layers=list(range(10, 20)),
                     moefy_blocks=8, native_margin=0.10, native_blocks=8, seeds=[0, 1, 2], budgets=[2, 3, 4, 5], eval_blocks=24,
                     calib_blocks=2, calib_source="sotu", calib_alt="shakespeare", batch_blocks=8, k_base=1,
                     k_base_sweep=[0, 1, 3, 5], lexi_samples=512, match_iters=6, match_blocks=2, n_resamples=2999,
                     speed_shape="dsv2-lite", speed_prefill=512, speed_rounds=7),
        "smoke": dict(models_profile="smoke", moefy_experts=4, moefy_shared=2, moefy_layers=[27, 28], native_margin=0.02, moefy_blocks=2, native_blocks=2,
                      seeds=[0], budgets=[1, 2], eval_blocks=4, calib_blocks=1, batch_blocks=2,
                      k_base_sweep=[0, 1], lexi_samples=32, match_iters=3, match_blocks=1, n_resamples=199,
                      speed_shape="tiny", speed_prefill=32, speed_rounds=2),
        "paper": dict(models_profile="paper", moefy_layers=list(range(30)), eval_blocks=256, calib_blocks=64,
                      match_iters=10, match_blocks=8, n_resamples=4999, speed_rounds=9),
    },
    checks=(
        # run_grid refuses a budget at or above the native top-k (a budget must cut something)
        (f"{BELOW_NATIVE} (the trained MoE's moe_top_k by models_profile: {_SHARED_TOP_K}; "
         "a checkpoint's num_experts_per_tok)", _budgets_below_native),
        ("k_base must not exceed the smallest budget", lambda p: p["k_base"] <= min(p["budgets"])),
        ("k_base_sweep needs a value at or below the half budget (the one of budgets nearest half the native top-k)",
         _k_base_sweep_reaches_half),
        ("calib_alt must differ from calib_source", lambda p: p["calib_alt"] != p["calib_source"]),
        # the MoEfied subject's K_orig is at most its expert count, and its experts split SmolLM2's MLPs evenly
        ("budgets must each be below moefy_experts (the MoEfied subject's native top-k is at most its routed expert "
         "count)", lambda p: bool(p["checkpoint"]) or max(p["budgets"]) < p["moefy_experts"]),
        # shared experts beside routed ones, as DeepSeek's 2 beside 64: fewer shared than routed (issue 40, point 5)
        ("moefy_shared must be below moefy_experts (the shared experts stand beside the routed ones, fewer of them)",
         lambda p: p["moefy_shared"] < p["moefy_experts"]),
        (f"moefy_experts + moefy_shared must divide SmolLM2-135M's MLP width ({SMOLLM2_MLP_WIDTH})",
         lambda p: bool(p["checkpoint"]) or SMOLLM2_MLP_WIDTH % (p["moefy_experts"] + p["moefy_shared"]) == 0),
        ("moefy_layers must lie within SmolLM2-135M's 30 decoder layers",
         lambda p: bool(p["checkpoint"]) or max(p["moefy_layers"]) < SMOLLM2_LAYERS),
        # the thresholds are matched on the first match_blocks of the calibration blocks
        ("match_blocks must not exceed calib_blocks", lambda p: p["match_blocks"] <= p["calib_blocks"]),
    ),
)

#: the control every quality claim names: the main subject's experts must matter (see :data:`CLAIMS`)
QUALITY_CONTROL = "experts_matter"
#: the control of Alloc-T's claims: its allocation follows routing entropy (issue 40, point 6)
T_MECHANISM = "t_follows_entropy"
#: the regime control of Alloc-L's claims: the isolated profile's rows are comparable (issue 40, point 5)
REGIME_CONTROL = "profile_comparable"
#: its bound on max_i S[i, K_orig] / min_i S[i, K_orig] (the issue's example, fixed before the deciding run)
REGIME_SPREAD = 2.0
#: the same control on the second subject, the trained MoE; across_models names both
SECOND_CONTROL = "experts_matter_trained"
#: the tolerance of the two "barely matters" claims (k_base_1, calib_robust), and so of their controls
BARELY = 0.02
#: their resolution (Claim.needs): an interval wider than the tolerance cannot show a ratio within it
_BARELY_NEEDS = f"its tolerance ({BARELY:g}): a wider interval cannot show a ratio within it"

# Where the claim definitions changed with the move onto MoEfied SmolLM2 (issue 27), and why; each was written
# before any run on the new subject (eb26a88, before its first book run), none after seeing a verdict:
# * experts_matter: the wording says "main subject" because the chapter now has two; its test (>= 10%, the
#   models page's threshold) is unchanged.
# * experts_matter_trained: the same control, with the same threshold, on the second subject: the issue keeps the
#   trained MoE as a subject, and a subject whose experts do not matter cannot show an allocation effect.
# * across_models: the abstract's "extensive experiments across multiple MoE models", which the issue asks to decide
#   on both subjects. Its test is lt_beats_uniform's (Alloc-L+T / uniform < 1), required on every subject and
#   decided on the least favourable one, the strictest reading; with both subjects' controls.
# Issue 40, point 7: Alloc-L's DP over the sum of log-perplexities (the same kernel on log S) is shown as a labelled
# deviation (tables.log_deviation_rows, the notebook's "A labelled deviation" section). It is not the paper's
# method (the paper's DP sums raw perplexities, ../shared/papers/alloc-moe.md): no claim or control reads it.
CLAIMS = [
    # controls first: record_claims decides them before the claims that name them
    # experts_matter: every budget here lies between uniform top-1 and the native top-k, so the gap between
    # those two bounds what any allocation of a budget can gain or lose. If top-1 costs under 10% perplexity,
    # the methods' differences at half budget are a fraction of that, comparable with the 2% tolerance of the
    # barely-matters claims and with evaluation noise, and a "beats" or "barely matters" verdict says more
    # about the subject than about the method. 10% is the models page's threshold for the same question
    # ("top-1 routing costs >= 10% perplexity"), five times that 2% tolerance; fixed before any run.
    C.Claim(QUALITY_CONTROL, "The main subject's experts matter: uniform top-1 routing costs ≥ 10% held-out "
            "perplexity against the native top-k", "—", "ours (the models page's threshold)", C.at_least(1.10),
            kind="control"),
    C.Claim(SECOND_CONTROL, "The trained MoE's experts matter: uniform top-1 routing costs ≥ 10% held-out perplexity "
            "against the native top-k", "—", "ours (the models page's threshold)", C.at_least(1.10), kind="control"),
    # k_base_matters: k_base_1 says the perplexity at K_base = 1 is within 2% of the best K_base. That only
    # informs if the same measurement can leave the 2% band: K_base at the ends of the swept range (0: a token
    # may get no routed expert; the half-budget k: plain uniform top-k) must move it by more than 2%.
    C.Claim("k_base_matters", "K_base can matter: Alloc-T at half budget with K_base at an end of the swept range is "
            f"more than {BARELY:.0%} worse than at the best K_base (k_base_1's tolerance)", "—", "ours",
            C.predicate(f"ours: perplexity at the worse end of the K_base sweep / at the best K_base > {1 + BARELY:g}",
                        lambda v: v > 1 + BARELY, boundaries=(1 + BARELY,)), kind="control"),
    # calib_matters: calib_robust says two real calibration texts give held-out perplexities within 2% of each
    # other. That only informs if calibration can move it at all: a profile on random token ids (uniform over
    # the vocabulary, seed 0), which carry no language, must move the same ratio by more than 2%.
    C.Claim("calib_matters", "Calibration can matter: Alloc-L profiled on random token ids moves held-out perplexity "
            f"by more than {BARELY:.0%} (calib_robust's tolerance)", "—", "ours",
            C.predicate(f"ours: perplexity ratio (profiled on random tokens / the first text) outside 1 ± {BARELY:g}",
                        lambda v: abs(v - 1.0) > BARELY, boundaries=(1 - BARELY, 1 + BARELY)), kind="control"),
    # profile_comparable (issue 40, point 5; fixed before the run that decides it, on no verdict): Alloc-L's DP
    # minimises the sum of raw perplexities of an isolated profile whose row i is measured with every deeper layer
    # at top-1 (../shared/papers/alloc-moe.md, the paper's method as its notes give it). The rows share a scale
    # only where top-1 is mild: on DeepSeek-V2-Lite, the paper's subject, two shared experts stay on in every
    # layer and 6 of 64 routed experts are kept, so deep layers at top-1 barely move the shallow rows. On our
    # last book run (MoEfied SmolLM2, no shared expert, K_orig = 7 of 8, top-1 9.4x) the rows' baselines
    # S[i, K_orig] differed up to 9x and the DP gave every deep layer one expert ([7,6,5,2,4,1,2,1,1,1]):
    # a verdict there says more about that subject than about the method. The control: the rows' baselines
    # (each row's K_orig column, the row's layer at its native top-k) lie within a factor 2 of each other, the
    # issue's bound. Interval: a percentile bootstrap over the profile's calibration segments (as shallow_more's).
    # It is named by the claims that read Alloc-L's allocation (lt_beats_uniform, l_helps, beats_baselines,
    # shallow_more) and by across_models, whose main-subject arm is that same allocation; the control measures
    # the main subject's profile only, so across_models' trained-MoE arm stays under experts_matter_trained alone.
    C.Claim(REGIME_CONTROL, "The main subject is in the paper's regime: the rows of Alloc-L's isolated profile are "
            f"comparable, max_i S[i, K_orig] / min_i S[i, K_orig] ≤ {REGIME_SPREAD:g} (row i measured with every deeper "
            "layer at top-1; its K_orig column is the row's baseline)", "mild top-1 rows (DeepSeek-V2-Lite: 2 shared "
            "experts, 6 of 64 routed)", "the paper's method and subject (our notes)",
            C.predicate(f"ours: max / min over rows of S[i, K_orig] ≤ {REGIME_SPREAD:g}", lambda v: v <= REGIME_SPREAD,
                        boundaries=(REGIME_SPREAD,)), kind="control"),
    C.Claim("lt_beats_uniform", "At half budget, Alloc-L+T (Alloc-MoE) beats uniform top-k",
            "43.09 vs 41.27 … 45.48 vs 43.90 at B = 78 (avg. accuracy, DeepSeek-V2-Lite)", "ablation table",
            C.predicate("ours: perplexity ratio Alloc-L+T / uniform < 1 (interval over seeds)", lambda v: v < 1.0,
                        boundaries=(1.0,)),
            controls=(QUALITY_CONTROL, REGIME_CONTROL)),
    # across_models: the abstract's "across multiple MoE models". Decided on the least favourable of the two
    # subjects (MoEfied SmolLM2-135M; the trained MoE over its seeds): it holds only if Alloc-L+T beats uniform
    # on both, fails if it loses on either. Each subject's own control must hold.
    C.Claim("across_models", "Alloc-MoE beats uniform top-k at half budget across MoE models (here MoEfied "
            "SmolLM2-135M and the MoE trained on the models page)", "\"extensive experiments across multiple MoE "
            "models\"", "abstract",
            C.predicate("ours: perplexity ratio Alloc-L+T / uniform < 1 on every subject (the least favourable shown)",
                        lambda v: v < 1.0, boundaries=(1.0,)),
            controls=(QUALITY_CONTROL, REGIME_CONTROL, SECOND_CONTROL)),
    C.Claim("l_helps", "Alloc-L alone beats uniform top-k at half budget", "44.61 vs 43.90 (B = 78)", "ablation table",
            C.predicate("ours: perplexity ratio Alloc-L / uniform < 1", lambda v: v < 1.0, boundaries=(1.0,)),
            controls=(QUALITY_CONTROL, REGIME_CONTROL)),
    # Issue 40, point 6 (fixed before the run that decides it): Alloc-T ranks candidates by gate probability, so
    # that confident tokens give up slots to uncertain ones, and the paper reports allocated counts correlating
    # > 0.7 with routing entropy (../shared/papers/alloc-moe.md). Where our allocation does not follow entropy,
    # t_helps and t_tight test something other than the paper's mechanism: the control asks the correlation to
    # be positive (its interval above 0). The paper's 0.7 is a result it reports on DeepSeek-V2-Lite (64 routed
    # experts, 6 per token), shown beside ours; it is not a condition of the method, and a control asks whether
    # the mechanism is present here at all (the direction: uncertain tokens get more), not how strongly.
    C.Claim(T_MECHANISM, "Alloc-T's mechanism works here: at half budget, tokens with higher routing entropy get more "
            "experts (mean over MoE layers of the Spearman correlation of a token's allocated count with its routing "
            "entropy, interval over tokens)", "> 0.7", "Alloc-T's analysis: allocated counts vs routing entropy",
            C.predicate("ours > 0", lambda v: v > 0.0, boundaries=(0.0,)), kind="control"),
    C.Claim("t_helps", "Alloc-T alone beats uniform top-k at half budget", "45.42 vs 43.90 (B = 78)", "ablation table",
            C.predicate("ours: perplexity ratio Alloc-T / uniform < 1", lambda v: v < 1.0, boundaries=(1.0,)),
            controls=(QUALITY_CONTROL, T_MECHANISM)),
    C.Claim("t_tight", "Alloc-T helps most at tight budgets", "+1.56 points at B = 52, +0.24 at B = 130",
            "ablation table",
            C.predicate("ours: log-perplexity gain of Alloc-T at the tightest budget minus at the loosest > 0",
                        lambda v: v > 0, boundaries=(0.0,)), controls=(QUALITY_CONTROL, T_MECHANISM)),
    C.Claim("beats_baselines", "At half budget Alloc-MoE beats the budgeted baselines (LExI, top-p, NAEE)",
            "best average on NLU, reasoning and math", "main table",
            C.predicate("ours: perplexity ratio Alloc-L+T / each baseline < 1 (the least favourable shown)",
                        lambda v: v < 1.0, boundaries=(1.0,)), controls=(QUALITY_CONTROL, REGIME_CONTROL)),
    C.Claim("k_base_1", "K_base = 1 is near-optimal for Alloc-T", "K_base ablation", "§ analysis",
            C.predicate("ours: perplexity at K_base = 1 within 2% of the best K_base", lambda v: v <= 1 + BARELY,
                        boundaries=(1 + BARELY,)),
            controls=(QUALITY_CONTROL, "k_base_matters"), needs=_BARELY_NEEDS),
    C.Claim("shallow_more", "Alloc-L gives shallow layers more experts than deep ones", "allocation figure",
            "§ analysis",
            C.predicate("ours: mean k of the shallower half minus the deeper half > 0", lambda v: v > 0,
                        boundaries=(0.0,)), controls=(QUALITY_CONTROL, REGIME_CONTROL)),
    C.Claim("calib_robust", "The calibration set barely matters", "calibration ablation", "§ analysis",
            C.predicate("ours: perplexity ratio (profiled on the second text / the first) within 2% of 1",
                        lambda v: abs(v - 1.0) <= BARELY, boundaries=(1 - BARELY, 1 + BARELY)),
            controls=(QUALITY_CONTROL, "calib_matters"), needs=_BARELY_NEEDS),
    # Speed: what we time is the MoE blocks alone (router, routed and shared experts) at the allocation Alloc-MoE
    # chose at half budget. The rest of a model costs the same at every budget, so the MoE blocks' speed-up
    # bounds the whole model's from above: the paper's whole-model figure needs at least as much from them.
    # The test is the paper's figure as a floor on that upper bound: below it the claim cannot hold at these
    # shapes here; at or above it the claim is not refuted (nothing more).
    C.Claim("speed_prefill", "MoE layers only: at half budget, with the allocation Alloc-MoE chose, prefill runs "
            "1.15× faster", "1.15× (whole model)", "speed table (DeepSeek-V2-Lite)",
            C.predicate("ours (MoE layers only, an upper bound on the whole model's speed-up) ≥ 1.15×",
                        lambda v: v >= 1.15, boundaries=(1.15,)), one_sided=C.FAILS),
    C.Claim("speed_decode", "MoE layers only: at half budget, with the allocation Alloc-MoE chose, decode runs "
            "1.34× faster", "1.34× (whole model)", "speed table (DeepSeek-V2-Lite)",
            C.predicate("ours (MoE layers only, an upper bound on the whole model's speed-up) ≥ 1.34×",
                        lambda v: v >= 1.34, boundaries=(1.34,)), one_sided=C.FAILS),
    C.Claim("budget_exact", "Every fixed-count method spends exactly its budget (counted activated pairs)", "—",
            "ours", C.predicate("max |measured − budget| ≤ 1e-9 experts/token", lambda v: v <= 1e-9), kind="check"),
    C.Claim("budget_matched", "Top-p and skipping, matched on calibration text, spend their budget on held-out text",
            "—", "ours", C.predicate("max relative miss ≤ 5%", lambda v: v <= 0.05), kind="check"),
    C.Claim("grouped_exact", "The grouped MoE layer (skipping inactive experts) computes the dense reference", "—",
            "ours", C.predicate("max relative error < 1e-4", lambda v: v < 1e-4), kind="check"),
]
