"""Adapters from the loop's ``Model`` protocol to real model APIs.

Each adapter lives in its own module and imports its provider's official SDK, an optional
dependency: ``pip install 'tracedagent[openai]'`` or ``'tracedagent[anthropic]'``. This
package imports neither SDK; ``from tracedagent.models import OpenAIChatModel`` loads the
adapter (and its SDK) on first use.

* ``tracedagent.models.openai.OpenAIChatModel`` - OpenAI's Chat Completions API, and every
  server that speaks it (vLLM, Ollama, LM Studio, OpenRouter, Azure OpenAI...).
* ``tracedagent.models.openai_responses.OpenAIResponsesModel`` - OpenAI's Responses API.
* ``tracedagent.models.anthropic.AnthropicModel`` - Anthropic's Messages API.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from ._common import MalformedResponseError

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .openai import OpenAIChatModel
    from .openai_responses import OpenAIResponsesModel

_LAZY = {"OpenAIChatModel": ".openai", "OpenAIResponsesModel": ".openai_responses", "AnthropicModel": ".anthropic"}


def _installed(sdk: str) -> bool:
    """Whether ``sdk`` can be imported, without importing it."""
    return importlib.util.find_spec(sdk) is not None


# ``from tracedagent.models import *`` loads each listed adapter; one whose SDK is missing
# would make it raise, so only the adapters of installed SDKs are listed.
__all__ = ["MalformedResponseError"]
if _installed("openai"):
    __all__ += ["OpenAIChatModel", "OpenAIResponsesModel"]
if _installed("anthropic"):
    __all__ += ["AnthropicModel"]


def __getattr__(name: str) -> Any:
    """Import an adapter's module (and so its SDK) only when the adapter is asked for."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
