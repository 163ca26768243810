"""The shared-models page (a support chapter, run before the papers): SmolLM2 offline and the LMs
trained here. The models themselves are the shared core's :mod:`acl26.zoo`; :mod:`.spec` holds the page's
parameters and checks, :mod:`.study` its measurements, :mod:`.tables` its tables, :mod:`.verdicts` the checks'
verdicts, :mod:`.bench` its benchmarks."""

from acl26 import zoo
from acl26.chapter import Chapter
from acl26.papers.models import bench, spec, study, tables, verdicts  # noqa: F401  (study, tables: the notebook's)

CHAPTER = Chapter(
    id="models",
    title="Shared models: SmolLM2 offline and small LMs trained here",
    kind="support",
    spec=spec.SPEC,
    claims=tuple(spec.CLAIMS),
    record_claims=verdicts.record_claims,
    assets=("smollm2", *zoo.ASSETS),
    benchmarks=bench.benchmarks,
    order=0,
)
