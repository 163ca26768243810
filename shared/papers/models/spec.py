"""The shared-models page (a support chapter): its parameters and its checks, fixed before any run.

The page's parameters are the shared core's :data:`acl26.zoo.SPEC` (the chapters train and load
the same models through it); :data:`CLAIMS` holds its checks. The measurements are :mod:`.study`,
the verdicts :mod:`.verdicts`.
"""

from __future__ import annotations

from acl26 import claims as C
from acl26.zoo import SPEC  # noqa: F401  (the page's parameters)


#: the page makes no claim of any paper: these are our own checks of the shared models (shown apart)
# dense_learns was removed with the dense LM itself (issue 27, point 3): once Sherry trained SmolLM2's own
# weights no chapter used that model, so there was nothing left for the check to vouch for.
CLAIMS = [
    C.Claim("smollm2_ppl", "SmolLM2-135M-Instruct (dequantised Q4_1) scores the 2016 State of the Union as expected",
            "22.4 (our survey of the offline assets)", "our measurement when the assets were chosen",
            C.within(22.4, 0.10), kind="check"),
    C.Claim("moe_learns", "The MoE LM learns: validation perplexity under half the unigram baseline's",
            "—", "ours", C.predicate("ours ≤ 0.5 × unigram", lambda v: v <= 0.5, boundaries=(0.5,)), kind="check"),
    C.Claim("experts_matter", "The experts matter: routing to top-1 instead of top-k costs ≥ 10% perplexity",
            "≥ 10%", "ours (Alloc-MoE needs something to allocate)", C.at_least(0.10), kind="check"),
]
