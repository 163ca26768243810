"""The shared-models page (a support chapter, run before the papers): SmolLM2 offline and the LMs
trained here. The models themselves are the shared core's :mod:`acl26.zoo`."""

from acl26 import zoo
from acl26.chapter import Chapter
from acl26.papers.models import study

CHAPTER = Chapter(
    id="models",
    title="Shared models: SmolLM2 offline and small LMs trained here",
    kind="support",
    spec=zoo.SPEC,
    claims=tuple(study.CLAIMS),
    record_claims=study.record_claims,
    assets=("smollm2", *zoo.ASSETS),
    order=0,
)
