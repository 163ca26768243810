"""acl26: the shared package behind the acl26-repro book.

The book reproduces ACL 2026 papers on efficient LLMs (listed by ``acl26 list``). Each paper is one
papermill-parameterised notebook in ``notebooks/`` that imports this package; the package holds
everything a test must check: assets, parameters, the claims ledger, the notebook runner, and one
package per paper (``acl26.papers.<id>``). Numba kernels live in ``acl26.kernels``.
"""

__version__ = "0.1.0"

import os as _os

# The book works offline: the HuggingFace hub is out of reach, so never try it.
for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    _os.environ.setdefault(_var, "1")
_os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
