"""The chapter's generation loop: k sampled rollouts per prompt with one prefill per prompt.

It lives in :mod:`acl26.rollout` (MTA samples its responses with it too); the names stay here.
"""

from acl26.rollout import Rollouts, check_decoding, rollouts, sample_next

__all__ = ["Rollouts", "check_decoding", "rollouts", "sample_next"]
