"""A tiny registered 'paper' for runner tests: its notebook can be told to fail midway."""

from acl26 import claims as C
from acl26.params import Param, ParamSpec

SPEC = ParamSpec(
    paper="fake",
    params=(Param("value", int, "a number to record", min=0), Param("fail", bool, "raise after saving results")),
    profiles={"book": {"value": 3, "fail": False}, "smoke": {"value": 1}, "paper": {}},
)
CLAIMS = [C.Claim("positive", "the value is positive", "> 0", "nowhere", C.at_least(1))]


def record_claims(ledger, results):
    ledger.record("positive", results["value"])


def chapter():
    from acl26.chapter import Chapter

    return Chapter(id="fake", title="Fake: a test paper", arxiv="0000.00000", venue="none", spec=SPEC,
                   claims=tuple(CLAIMS), record_claims=record_claims, order=99)


def notebook(spec=SPEC) -> dict:
    import nbformat as nbf

    nb = nbf.v4.new_notebook()
    params = nbf.v4.new_code_cell(spec.notebook_cell())
    params.metadata["tags"] = ["parameters"]
    nb.cells = [
        nbf.v4.new_markdown_cell("# Fake paper"),
        params,
        nbf.v4.new_code_cell(
            "import fakepaper\nfrom acl26 import claims\n"
            "P = fakepaper.SPEC.from_namespace(globals())\n"
            "ledger = claims.Ledger('fake', P['profile'], fakepaper.CLAIMS, params=P)\n"
            "fakepaper.record_claims(ledger, {'value': P['value']})\nledger.save()"),
        nbf.v4.new_code_cell("if P['fail']:\n    raise RuntimeError('boom after saving')"),
    ]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb
