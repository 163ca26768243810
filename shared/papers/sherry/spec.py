"""Sherry chapter (ACL 2026, arXiv 2601.07892): its parameters, its rows (the paper's claims, facts by
construction, our checks, the controls) and the paper's figures they use, fixed before any run.
The experiments are :mod:`.study`, the verdicts :mod:`.verdicts`, the benchmarks :mod:`.bench`."""

from __future__ import annotations

from acl26 import claims as C
from acl26 import zoo
from acl26.checks import SEED_MAX
from acl26.papers.sherry import decoder, ikllama, llamacpp, speed
from acl26.papers.sherry import paper as sherry_paper
from acl26.params import Param, ParamSpec, folder_with


#: variant -> (quantizer mode, Arenas, label). absmean ternary takes one scale per output row, the
#: granularity of 3:4's scale: with one scale per tensor it would start behind, which favours Sherry in
#: matches_158.
VARIANTS = {
    "fp": ("fp", False, "full precision (continued training)"),
    "absmean": ("absmean_row", False, "absmean ternary, 1.58-bit (BitNet b1.58's quantizer, one scale per row)"),
    "sparse34": ("sparse34", False, "3:4 ternary, 1.25-bit, without Arenas"),
    "sparse34+arenas": ("sparse34", True, "3:4 ternary, 1.25-bit, with Arenas (Sherry)"),
}


#: The book's QAT design, fixed before any run (the Deviations say why): four contiguous middle blocks of
#: SmolLM2's 30 are trained through the quantizer, end to end on the language-model loss, while the
#: rest stays frozen in full precision. Full QAT of all 30 blocks does not fit 2 cores: a step of 4
#: blocks of 256 tokens took 2.0 s here with 4 blocks trainable (bf16), and the chapter trains its
#: variants and seeds within its time share. Middle blocks, not the last ones: their gradients pass
#: through the 13 blocks above, as in a full QAT, and neither end of the network is special-cased.
#: Tried and not taken (issue 40, the chapter's time share): blocks 21-24, with 5 frozen blocks above instead of 13.
#: From an empty cache the chapter took 1957 s there against 2640 s here (AMD EPYC, 2 cores; its share 2160 s), but
#: the Arenas run had not settled (its perplexity still fell 4.8-6.5% over its last two evaluations), so the control
#: arenas_settled failed and arenas_gain and matches_158 were not testable, and trapping's interval (0.961
#: [0.948, 0.974]) no longer excluded its boundary (0.95; here 0.908 [0.890, 0.926]). A time trade that costs claims
#: their test is not one the chapter takes (DESIGN.md: never by cutting what a claim's test needs); the blocks stay.
QAT_BLOCKS = (13, 14, 15, 16)
#: The QAT recipe (issue 40, point 1), the authors' as far as 2 cores allow (Sherry/script/train_llama_1b.sh and
#: Sherry/models/utils_quant.py, class Arenas, on AngelSlim's sherry branch): a constant learning rate of 1e-4 (their
#: script: 1e-4, constant; the 5% warm-up before it is our choice, for Adam's first steps on one block of text), weight
#: decay 0, Arenas' lambda rising linearly over the first 10% of steps and falling by cosine to 0, and lambda = 0
#: outside training (every evaluation scores the pure ternary model). More, smaller steps for the same tokens as
#: before (60 steps of 4 blocks -> 240 of 1 block of 256 tokens): lambda is below 0.1 on steps 195-239, so 45 steps
#: at the full learning rate train the blocks purely ternary, where the old recipe (cosine learning rate, 60 steps)
#: left under 2 peak-rate steps. One block per step also bounds each snapshot's dL/dX and dL/dW to 255 ranks (256
#: tokens, the last with no target), where four blocks allowed 576 in the query and MLP-up layers: the rank ratios
#: compare variants at the same bound, and each snapshot is noisier. Fixed before the run that decides the claims;
#: all four variants use it.
QAT_STEPS = 240
QAT_BATCH = 1
QAT_LR = 1e-4
#: warm-up of the learning rate, as a fraction of the steps (then constant: TrainConfig.min_lr_frac = 1)
QAT_LR_WARMUP = 0.05
#: evaluations of the held-out loss during training: every QAT_STEPS // QAT_EVALS steps (the last two, steps 216 and
#: 240, both lie where Arenas' lambda < 0.1: arenas_settled reads them)
QAT_EVALS = 10
#: Arenas has faded where lambda is below this (arenas_settled: both of the last two evaluations must lie there)
ARENAS_FADED = 0.1


#: Seeds of the full-precision variant in the book profile (the first of ``seeds``): fixed before the run that decides
#: the claims (issue 40, the chapter's time share). "fp" serves only the control qat_separates (absmean ternary's
#: perplexity over full precision's > 1); no claim reads it. Its two other seeds took about 450 s of the chapter's
#: 3714 s from an empty cache against a 2160 s share (session 47), while the control's margin is about 30 times its
#: half-width over 3 seeds (1.23 [1.22, 1.24]). With one fp seed the control takes the rule every noisy row has for
#: one seed (Ledger.record_noisy): a paired bootstrap of the perplexity ratio over the first seed's 32 held-out
#: blocks. The three claims that compare ternary variants keep their three seeds.
FP_SEEDS = 1


#: The shape whose whole-model files decide ``size`` (issue 40, point 3): the paper's size figure is the 0.7B
#: model's files (its speed/size table: BF16 1360, I2_S 256.56, Sherry 205.50 MB), and a file's bytes depend on
#: the format and the shape, not on the training. SmolLM2's tied bf16 embedding is about two thirds of its
#: 2-bit file, so on SmolLM2 the ratio measures the embedding's share, not the format; its files stay as a check
#: (``size_trained``). The files hold random 3:4 weights, written and read back by the same packer.
SIZE_SHAPE = "bitnet-0.7b"


#: the direct 2-bit peers speed_vs_i2 takes the fastest of (f16 heads, as our bf16 ones): llama.cpp's TQ2_0 and
#: ik_llama.cpp's IQ2_BN / IQ2_BN_R4 (issue 41, point 1)
TWO_BIT_PEERS = ("ggml-tq2_0", "ik-iq2_bn", "ik-iq2_bn_r4")
# Issue 41, point 1 ("like for like: activations, head precision") and the paper's conditions; written and
# committed before the run that decides them (session 46). speed_vs_tl2 and speed_vs_i2 compare Sherry's rows on
# 8-bit activations (SPEED_SHERRY) against TL2 on 8-bit activations (SPEED_TL2, ours) and against the fastest
# 2-bit peer. The paper's speed table times bitnet.cpp's I2_S and TL2 kernels and Sherry's own kernel, and all of
# them multiply int8 activations (BitNet b1.58 is W1.58A8; the TL kernels build their tables from int8 activations
# as acl26.kernels.ternary.act8 does); so do the peers (llama.cpp's TQ2_0 through Q8_K, ik_llama.cpp's IQ2_BN
# through Q8_K64). The rows took Sherry and TL2 on float32 activations until now, against 8-bit peers: not like for
# like. Considered: keeping float32 and adding 8-bit rows apart; rejected, since the claim is the paper's and its
# kernels are 8-bit. The float32-activation figures stay in each row's text. The tests (> 1.0x, >= 1.0x) are
# unchanged. (The acl26 bench run that preceded this change already had Sherry's 8-bit row at 1.42x the fastest
# ik_llama.cpp row; the reason for the change is the paper's kernels, not that figure.)
SPEED_SHERRY, SPEED_TL2 = "sherry-a8", "tl2-a8"
#: Timing rounds of every speed comparison in the book profile (issue 40, point 4): the speed verdicts are decided on
#: the range over rounds of per-round ratios, and with 3 rounds that range flipped between runs on one machine. With
#: 7 rotated rounds the range over them covers the median ratio with probability 1 - 2 x 0.5^7 = 98.4% (the
#: distribution-free interval for a median from its order statistics).
SPEED_ROUNDS = 7


SPEC = ParamSpec(
    paper="sherry",
    params=(
        Param("speed_shapes", list, "model shapes for the decode-speed table", elem=str,
              choices=tuple(decoder.SHAPES) + tuple(decoder.ALIASES)),
        Param("speed_formats", list, "weight formats for the decode-speed table ('-q8head': the fused step reading "
              "an 8-bit head; '-a8': the fused step on 8-bit activations)", elem=str, choices=speed.SPEED_FORMATS),
        Param("speed_tokens", int, "decode steps timed per (shape, format)", min=1),
        Param("speed_repeats", int, "timing repeats (medians are reported)", min=1),
        Param("speed_peers", list, "llama.cpp and ik_llama.cpp decode peers timed in the same rounds (each fork's "
              "llama-bench on GGUF files of each shape; skipped, saying why, where it is not built)", elem=str, min_len=0,
              choices=tuple(llamacpp.PEERS) + tuple(ikllama.PEERS)),
        Param("peer_rounds", int, "rounds of the GEMV comparison with llama.cpp's TQ1_0 / TQ2_0 (when built)", min=1),
        Param("ptq_chars", int, "characters of the 2016 State of the Union scored with SmolLM2 (0: all)", min=0,
              rule=(f"must be 0 (the whole address) or at least {zoo.MIN_PPL_CHARS} characters (a perplexity needs "
                    "2 tokens)", lambda v: v == 0 or v >= zoo.MIN_PPL_CHARS)),
        Param("checkpoint", str, "local folder of a LLaMA-family causal LM (transformers) to train in place of "
              "SmolLM2-135M-Instruct: the paper's LLaMA-3.2-1B, for example; '' for SmolLM2",
              rule=folder_with("config.json", "tokenizer_config.json"), path=True),
        Param("qat_blocks", list, "decoder layers trained through the quantizer, end to end (0 is the shallowest); the "
              "others, the embeddings and the head stay frozen in full precision", elem=int, min_len=1, min=0),
        Param("qat_batch", int, "blocks of text per QAT step", min=1),
        Param("block_size", int, "tokens per block of text (training and evaluation)", min=8),
        Param("variants", list, "QAT variants, all trained for the same steps", elem=str, choices=tuple(VARIANTS)),
        Param("qat_steps", int, "QAT steps per variant", min=2),
        Param("qat_lr", float, "QAT peak learning rate", min=1e-6, max=1.0),
        Param("eval_blocks", int, "held-out blocks (test split) for the reported perplexities", min=2),
        Param("track_every", int, "steps between weight-trapping snapshots", min=1),
        Param("seeds", list, "QAT seeds: every variant is trained once per seed, on that seed's batches", elem=int,
              min=0, max=SEED_MAX),
        Param("fp_seeds", int, "how many of seeds (the first) the full-precision variant trains on: it serves only the "
              "control qat_separates, which with one seed is decided on a paired bootstrap over the first seed's "
              "held-out blocks", min=1),
        Param("gen_tokens", int, "tokens generated greedily per prompt with the packed 3:4 model and the full-precision "
              "subject (0: none)", min=0),
        Param("size_shape", str, "model shape whose whole-model files decide the size claim (random 3:4 weights; "
              "bitnet-0.7b is the paper's 0.7B row)", choices=tuple(decoder.SHAPES)),
    ),
    profiles={
        # the paper's first speed shape, the one every speed verdict reads (its table: BitNet b1.58 0.7B). Its 3B
        # shape and LLaMA-3.2-1B's (a 128k-word head) are timed by the paper profile and `acl26 bench sherry`: with
        # ik_llama.cpp's rows beside llama.cpp's, three shapes took the book profile to 1039 s against its 15
        # minutes (AMD EPYC, session 44), and the 3B rows, which no verdict reads, took about 6 of the speed table's
        # 9.5 minutes in the chapter's 3714 s from an empty cache against its 36-minute share (session 47)
        "book": dict(speed_shapes=["bitnet-0.7b"],
                     # tl2-a8: speed_vs_tl2's comparator (SPEED_TL2)
                     speed_formats=["fp32", "bf16", "i2", "tl2", "sherry", "sherry-q8head", "sherry-a8",
                                    "sherry-a8-q8head", "tl2-a8"],
                     # issue 41, point 1: ik_llama.cpp's 2-bit BitNet types (IQ2_BN and IQ2_BN_R4: each was the
                     # fastest peer in one of our two quiet benches) with either head, beside llama.cpp's TQ types
                     speed_peers=[k for k in llamacpp.PEERS if k != "ggml-f16"]
                     + ["ik-iq2_bn", "ik-iq2_bn_r4", "ik-iq2_bn-q8head", "ik-iq2_bn_r4-q8head"],
                     speed_tokens=8, speed_repeats=SPEED_ROUNDS,
                     peer_rounds=SPEED_ROUNDS, ptq_chars=0, checkpoint="", variants=list(VARIANTS),
                     qat_blocks=list(QAT_BLOCKS), qat_batch=QAT_BATCH, block_size=256, qat_steps=QAT_STEPS, qat_lr=QAT_LR,
                     eval_blocks=32, track_every=6, seeds=[0, 1, 2], fp_seeds=FP_SEEDS, gen_tokens=24,
                     size_shape=SIZE_SHAPE),
        "smoke": dict(speed_shapes=["tiny"], speed_peers=["ggml-f16", "ggml-tq2_0"], speed_tokens=3, speed_repeats=1, peer_rounds=1, ptq_chars=2000,
                      qat_blocks=[15], qat_batch=2, block_size=64, qat_steps=4, eval_blocks=4, track_every=2, seeds=[0, 1], fp_seeds=1,
                      gen_tokens=4,
                      size_shape="tiny"),
        # on a GPU: every block of the checkpoint (SmolLM2 has 30; give qat_blocks for another depth)
        "paper": dict(speed_shapes=["bitnet-0.7b", "llama-3.2-1b", "bitnet-3b"], speed_peers=list(llamacpp.PEERS) + list(ikllama.PEERS), speed_tokens=32, speed_repeats=SPEED_ROUNDS, qat_blocks=list(range(30)),
                      qat_batch=16, block_size=512, qat_steps=1000, eval_blocks=256, seeds=[0, 1, 2], fp_seeds=3),
    },
    checks=(
        # speed.speed_table: an alias counts as the shape it names
        ("speed_shapes must not name a shape twice (" + ", ".join(f"{a} is {s}" for a, s in decoder.ALIASES.items()) + ")",
         lambda p: len({decoder.ALIASES.get(s, s) for s in p["speed_shapes"]}) == len(p["speed_shapes"])),
        ("fp_seeds must not exceed the number of seeds", lambda p: p["fp_seeds"] <= len(p["seeds"])),
        # QATMonitor: the stuck share needs two snapshots after the first tenth of training
        ("track_every must be below qat_steps (the trapping statistics need two snapshots)",
         lambda p: p["track_every"] < p["qat_steps"]),
    ),
)


#: the paper's model sizes (MB) of its 0.7B model, by format
PAPER_MB = {r["format"]: r["mb"] for r in sherry_paper.paper_table() if r["model"] == "0.7B"}


#: the paper's whole-model size of Sherry over I2_S at 0.7B (its table: 205.50 / 256.56 MB)
PAPER_SIZE_RATIO = PAPER_MB["sherry"] / PAPER_MB["i2"]


#: the size claim's tolerance (its test: within 10% of the paper's ratio)
SIZE_TOL = 0.10


#: Sherry's streams over the 2-bit format's, per weight: 1.25 / 2 bits
STREAM_RATIO = 1.25 / 2


#: The least share of the 2-bit file its quantized layers must hold for the size claim to be testable
#: on that model, fixed before any run from the claim's own test: a file whose quantized layers hold a
#: share q of its bytes shrinks to at best 1 - q (1 - 1.25/2) when they go from 2 to 1.25 bits (scales
#: and the rest unchanged, or larger), so it can reach the test's upper end, PAPER_SIZE_RATIO x 1.10 =
#: 0.881, only when q >= (1 - 0.881) / (1 - 0.625) = 0.317. Below that, the whole-file ratio says how
#: big the embeddings are, not how small Sherry's format is.
SIZE_SHARE_MIN = (1 - PAPER_SIZE_RATIO * (1 + SIZE_TOL)) / (1 - STREAM_RATIO)


#: The same share in the paper's 0.7B files, from its table, if the rest is the same in both:
#: (256.56 - 205.50) / (256.56 x 0.375).
PAPER_SIZE_SHARE = (PAPER_MB["i2"] - PAPER_MB["sherry"]) / (PAPER_MB["i2"] * (1 - STREAM_RATIO))


#: The tolerance of matches_158 (perplexity within 5% of absmean ternary): the only accuracy test with a
#: band, and so the resolution asked of the perplexity comparisons. An interval wider than +-5% that holds the
#: test's boundary could not have told a 5% difference from none: arenas_gain and matches_158 each need it
#: (Claim.needs, a power rule for an inconclusive interval; a decisive interval stands however wide).
PPL_RESOLUTION = 0.05


#: The size of a gradient-rank change that counts as a collapse or a recovery. The paper shows the rank of
#: dL/dX *collapsing* under 3:4 (below 750 of 4096, comparable to binary) and gives no threshold; a change
#: under 5% would not be called a collapse, so the tests ask at least 5% (trapping: ratio < 0.95;
#: arenas_frees: ratio > 1.05) and each claim needs its interval to resolve 5% (Claim.needs).
RANK_RESOLUTION = 0.05


#: the rules in words of those resolutions (Claim.needs), fixed before any run
_PPL_NEEDS = f"matches_158's tolerance, {PPL_RESOLUTION:.0%} of the perplexity ratio: a wider interval could not tell " \
             "a 5% difference from none"
_RANK_NEEDS = f"{RANK_RESOLUTION:.0%} of the rank ratio, the least change called a collapse or a recovery"


# Where the claim definitions changed with the move onto SmolLM2 (issue 27), and why; each was written
# before the first book run on the new subject (d1add36), none after seeing a verdict:
# * qat_separates: its wording names absmean's per-row scale because the variant changed, as issue 27
#   asks (a per-tensor scale gave absmean a coarser scale than 3:4's and so favoured Sherry in
#   matches_158); its test (absmean / full precision > 1) is unchanged.
# * trapping, arenas_frees: decided on the gradients' effective rank (ratios, < 1 and > 1), because that
#   is how the paper defines weight trapping (§3: the gradients homogenise, their effective rank
#   collapses) and issue 27 asks for it; the stuck share, our own operationalisation, is shown beside.
# * trap_resolves: asks +-5% of those rank ratios (RANK_RESOLUTION) instead of +-1 point of the stuck
#   share (TRAP_RESOLUTION, the old arenas_frees margin, which no longer exists once the claims are rank
#   ratios). The paper gives the collapse no size; 5% is the same resolution the perplexity comparisons
#   ask, and a change below it would not be called a collapse. It failed in the first run (+-0.060) and
#   was left as it is.
# * size: the wording says which files are measured (the whole subject in 3:4); its test is unchanged.
# Issue 40, points 1 and 2 (written before the run that decides them; nothing of the new recipe had run):
# * arenas_settled (new control, named by arenas_gain and matches_158): the Arenas run must have settled as a pure
#   ternary model before its perplexity is compared; the authors train thousands of steps after lambda has faded,
#   and our old recipe left about 1.8 peak-rate steps, so a "does not hold" measured the schedule, not Arenas.
# * ppl_resolves and trap_resolves (joint controls: the wider of two half-widths) are gone: each claim names its
#   own resolution (Claim.needs, the same 5%), which only explains an inconclusive interval. The joint control
#   had blocked trapping, whose own interval (0.798 [0.761, 0.835]) excluded its boundary.
# * trapping and arenas_frees are decided on the effective rank of dL/dX, the layer's input gradient: the paper's
#   quantity ("prevents the gradients dL/dX from collapsing into a low-rank state"); dL/dW's rank, which Arenas
#   leaves unchanged (it scales a layer's dL/dW by 1 + lambda), is shown beside it. Their tests ask a change of at
#   least 5% (ratio < 0.95, > 1.05), the size the old control already asked the intervals to resolve.
# Issue 40, point 4: speed_vs_ggml is our comparison with llama.cpp's TQ kernels, not the paper's (which quotes
# bitnet.cpp's kernels): it is now a check, shown apart from the paper's claims; its test is unchanged.
# Issue 40, point 3 (written before the run that decides it): size and its control size_subject are measured on
# whole-model files of the paper's 0.7B shape (SIZE_SHAPE) with random 3:4 weights, because the paper's figure
# is that model's files and a file's bytes do not depend on the training; the test (within 10% of 80.1%) and
# the control's bound are unchanged. The trained subject's files stay, as the check size_trained. Only the
# wording of size_subject ("the files", not "the subject") and file_exact (which files are read back) changed
# with it: what they measure moved to the new files, their tests did not.
CLAIMS = [
    C.Claim("bits", "3:4 ternary packs into 5 bits per 4 weights", "1.25 bits/weight", "§3 (encoding)",
            C.equals(1.25), kind="fact"),
    C.Claim("size_subject", f"The files can show the size claim: their quantized layers hold at least "
            f"{SIZE_SHARE_MIN:.1%} of the 2-bit file (below that, no 1.25-bit format can bring the whole file "
            f"within the claim's band)", f"≈ {PAPER_SIZE_SHARE:.0%} in the 0.7B files (from its table)", "speed/size table",
            C.predicate(f"ours ≥ {SIZE_SHARE_MIN:.3f}", lambda v: v >= SIZE_SHARE_MIN, boundaries=(SIZE_SHARE_MIN,)),
            kind="control"),
    C.Claim("size", "Sherry's whole model takes this share of the 2-bit (I2_S) model's bytes (measured on the files "
            "our packer wrote of the paper's 0.7B shape, size_shape, with random 3:4 weights, read back bit-exact)",
            f"{PAPER_SIZE_RATIO:.1%} (0.7B: {PAPER_MB['sherry']:.2f} / {PAPER_MB['i2']:.2f} MB)", "speed/size table",
            C.within(PAPER_SIZE_RATIO, SIZE_TOL), controls=("size_subject",)),
    C.Claim("speed_vs_tl2", "Sherry decodes faster than the 1.67-bit format (TL2)", "148.27 vs 116.83 tok/s (0.7B)",
            "speed table, i7-14700HX", C.predicate("ours > 1.0×", lambda v: v > 1.0, boundaries=(1.0,))),
    # speed_vs_i2's test (>= 1.0x) is unchanged. What it is measured against moved from llama.cpp's TQ2_0 alone to
    # the fastest of the direct 2-bit peers timed in the same rounds with an f16 head (TWO_BIT_PEERS: TQ2_0 and
    # ik_llama.cpp's IQ2_BN / IQ2_BN_R4, 2 bits per weight as bitnet.cpp's I2_S): issue 41, point 1 asks every
    # verdict row that names a peer to take the fastest peer row of its run, like for like, and ik_llama.cpp is the
    # fastest BitNet CPU implementation by its author's measurements. Changed before any run that decided it with
    # the ik rows (the last book run, session 42, had TQ2_0 alone: yes, [1.22, 1.51]).
    C.Claim("speed_vs_i2", "Sherry decodes at least as fast as the 2-bit format (I2_S)", "148.27 vs 132.13 tok/s (0.7B)",
            "speed table, i7-14700HX", C.predicate("ours ≥ 1.0×", lambda v: v >= 1.0, boundaries=(1.0,))),
    # speed_vs_ggml's test (> 1.0x) is unchanged since it was first fixed; what it is measured on moved from one
    # 4096 x 14336 product to the sum over one decode step's 168 products of the 0.7B model (MODEL_GEMV_SHAPE),
    # because issue 28 (point 4) asks for exactly that and because the paper's speed figure is the 0.7B model's
    # decode, whose projections are 1536- and 4096-wide, not 14336-wide. Changed before the run that decided it;
    # the verdict went from yes [1.09, 1.14] to inconclusive [0.996, 1.02], against us.
    # Like for like with the peer's timer (issue 41, point 1; written before the run that decides it): our products
    # are timed prepared (acl26.kernels.ternary.prepare_gemv: the matrix's checks run once, before the timed calls),
    # as test-backend-ops checks its tensors before its timed loop. Every timed call of ours paid those checks until
    # now, about 15 us at 1536 x 1536 (38 against 21 us for the kernel, AMD EPYC): a bias against us of a quarter of
    # such a product. Each timed call still checks its activations (about 3 us), which the peer's loop does not.
    C.Claim("speed_vs_ggml", "Sherry's matrix-vector products are faster than llama.cpp's ternary kernels (TQ1_0, "
            "TQ2_0) over one decode step's projections of the 0.7B model, at the same thread count (our comparison: "
            "the paper quotes bitnet.cpp's kernels)",
            "(the paper: faster than the 2-bit and 1.67-bit kernels, 148.27 vs 132.13 and 116.83 tok/s, 0.7B)",
            "ours; llama.cpp's TQ types are the public CPU peers",
            C.predicate("ours: the faster TQ kernel's time / Sherry's > 1.0×", lambda v: v > 1.0,
                        boundaries=(1.0,)), kind="check"),
    C.Claim("ptq_collapses", "Ternarizing a pretrained model without training destroys it (the reason to train)",
            "motivates QAT", "§1-2", C.predicate("ppl ≥ 10× the full-precision model's", lambda v: v >= 10),
            kind="check"),
    C.Claim("qat_separates", "QAT tells ternary from full precision: absmean ternary (1.58-bit, per-row scale) ends "
            "with a higher "
            "perplexity than full precision trained alike (if it cannot, it cannot compare ternary variants)",
            "ternary costs accuracy (BF16 .558 vs BitNet .483, 1B)", "main table",
            C.predicate("ours: absmean-ternary ppl / full-precision ppl > 1", lambda v: v > 1.0, boundaries=(1.0,)),
            kind="control"),
    # arenas_settled: both of the last two evaluations of the Arenas run lie where lambda < ARENAS_FADED, and its held-out
    # perplexity moved by less than the perplexity resolution between them (the largest move over the seeds): the
    # model compared is a settled pure-ternary model, not one still recovering from the residual's removal.
    C.Claim("arenas_settled", f"The Arenas run has settled as a pure ternary model: over its last two evaluations, both "
            f"with λ < {ARENAS_FADED:g}, its held-out perplexity changes by less than {PPL_RESOLUTION:.0%} (the largest "
            "change over the seeds)", "thousands of steps after λ fades", "the authors' script (22,111 steps)",
            C.predicate(f"ours: |relative change| < {PPL_RESOLUTION:g}", lambda v: v < PPL_RESOLUTION,
                        boundaries=(PPL_RESOLUTION,)), kind="control"),
    C.Claim("arenas_gain", "Arenas improves 3:4 ternary training (decided only where QAT separates ternary from full "
            "precision and the Arenas run has settled)", "+4.59 points average accuracy (1B)",
            "ablation table", C.predicate("ours: lower perplexity with Arenas (ratio < 1)", lambda v: v < 1.0,
                                          boundaries=(1.0,)),
            controls=("qat_separates", "arenas_settled"), needs=_PPL_NEEDS),
    C.Claim("matches_158", "3:4 ternary with Arenas matches a denser ternary format's accuracy (decided only where QAT "
            "separates ternary from full precision and the Arenas run has settled)",
            "Sherry .519 = Tequila .519 (1B)", "main table",
            C.predicate("ours: perplexity within 5% of absmean ternary", lambda v: v <= 1.05, boundaries=(1.05,)),
            controls=("qat_separates", "arenas_settled"), needs=_PPL_NEEDS),
    C.Claim("trapping", "3:4 sparsity traps weights: the effective rank of the input gradients ∂L/∂X collapses, at "
            f"least {RANK_RESOLUTION:.0%} lower under 3:4 than under dense (absmean) ternary; ∂L/∂W's rank and the "
            "stuck-weight share beside it", "∂L/∂X's effective rank collapses (below 750 of 4096 under 3:4)",
            "§3 (Arenas)",
            C.predicate(f"ours: effective rank of ∂L/∂X, 3:4 / absmean < {1 - RANK_RESOLUTION:g}",
                        lambda v: v < 1 - RANK_RESOLUTION, boundaries=(1 - RANK_RESOLUTION,)), needs=_RANK_NEEDS),
    C.Claim("arenas_frees", "Arenas frees trapped weights: the effective rank of ∂L/∂X recovers, at least "
            f"{RANK_RESOLUTION:.0%} higher with Arenas than without; ∂L/∂W's rank and the stuck-weight share beside it",
            "Arenas keeps ∂L/∂X from collapsing into a low-rank state", "§3 (Arenas)",
            C.predicate(f"ours: effective rank of ∂L/∂X, with Arenas / without > {1 + RANK_RESOLUTION:g}",
                        lambda v: v > 1 + RANK_RESOLUTION, boundaries=(1 + RANK_RESOLUTION,)), needs=_RANK_NEEDS),
    C.Claim("packed_exact", "The packed 1.25-bit model computes what the fake-quantized model did",
            "(deployment)", "§4", C.predicate("|Δ ppl| / ppl < 1e-4", lambda v: v < 1e-4), kind="check"),
    C.Claim("file_exact", "The whole-model files our packer wrote (Sherry, 2-bit, BF16; of the 0.7B shape and of the "
            "trained subject) load back bit-exact: every unpacked ternary matrix and scale equals the "
            "fake-quantizer's, every other tensor the model's in bf16",
            "(deployment)", "§4", C.predicate("tensors that differ = 0", lambda v: v == 0), kind="check"),
    C.Claim("size_trained", "The trained subject's files, the whole model in 3:4 (its QAT'd blocks as trained, every "
            "other block ternarized): Sherry's file is smaller than the 2-bit file (the ratio beside the paper's is "
            "shown, not tested: it measures the subject's bf16 embedding share)", "(deployment)", "speed/size table",
            C.predicate("ours: Sherry's file / the 2-bit file < 1", lambda v: v < 1.0, boundaries=(1.0,)), kind="check"),
]


#: the matrix-vector shapes (rows x inputs) at which our kernels are timed beside ggml's: the
#: 4096-square layer of the kernel benchmarks, and the MLP shape of test-backend-ops' perf suite
GEMV_SHAPES = ((4096, 4096), (4096, 14336))
#: the model whose decode step's projections, summed, decide speed_vs_ggml (the paper's 0.7B row)
MODEL_GEMV_SHAPE = "bitnet-0.7b"
