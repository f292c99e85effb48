"""The core package imports without either model SDK, and each adapter names its extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sdk, adapter", [("openai", "OpenAIChatModel"), ("anthropic", "AnthropicModel")])
def test_core_imports_without_the_sdk_and_the_adapter_names_the_extra(sdk, adapter):
    script = (
        f"import sys; sys.modules[{sdk!r}] = None\n"
        "import tracedagent, tracedagent.models, tracedagent.testing\n"
        "try:\n"
        f"    from tracedagent.models import {adapter}\n"
        "except ImportError as exc:\n"
        "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert f"pip install 'tracedagent[{sdk}]'" in out


@pytest.mark.parametrize("blocked", [[], ["openai"], ["anthropic"], ["openai", "anthropic"]])
def test_star_import_gives_the_adapters_whose_sdk_is_installed(blocked):
    script = (
        "import sys\n"
        f"for sdk in {blocked!r}: sys.modules[sdk] = None\n"
        "from tracedagent.models import *\n"
        "print(sorted(name for name in ('OpenAIChatModel', 'AnthropicModel', 'MalformedResponseError')"
        " if name in globals()))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    expected = {"MalformedResponseError"} | {adapter for sdk, adapter in (("openai", "OpenAIChatModel"),
                                                                          ("anthropic", "AnthropicModel"))
                                             if sdk not in blocked}
    assert out.stdout.split("\n")[0] == str(sorted(expected))


def test_models_package_does_not_import_the_sdks():
    script = ("import sys, tracedagent, tracedagent.models\n"
              "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    assert json.loads(out.replace("'", '"')) == []
