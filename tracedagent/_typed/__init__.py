"""Python types, checked by pydantic: the one wing besides ``mcp/`` that may import pydantic
(and ``typing_extensions``, which pydantic brings), on ``_core`` only.

It owns what the loop's standard-library core only sees as protocols: a tool's arguments read
from its signature (``_arguments``: the JSON schema shown to the model and the
``ArgumentValidator`` that converts a call's arguments to the function's types, its errors
summarized for the model) and the public ``tool`` decorator and ``Registry`` that use it
(``_tools``); and a run's typed output (``_output``: the core's ``OutputSpec`` implemented with pydantic's
``TypeAdapter``).
"""
