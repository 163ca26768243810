"""The shared-models page (a support chapter, run before the papers): SmolLM2 offline and the LMs
trained here. The models themselves are the shared core's :mod:`acl26.zoo`."""

from acl26 import zoo
from acl26.chapter import Chapter
from acl26.papers.models import spec, study, verdicts  # noqa: F401  (study: the page's measurements)

CHAPTER = Chapter(
    id="models",
    title="Shared models: SmolLM2 offline and small LMs trained here",
    kind="support",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    assets=("smollm2", *zoo.ASSETS),
    order=0,
)
