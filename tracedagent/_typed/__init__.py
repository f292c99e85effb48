"""Python types checked by pydantic: the one wing besides ``mcp`` that imports it.

The core sees protocols only (``_core/_output.OutputSpec``); this wing implements them with
pydantic v2 (``TypeAdapter``): ``_output`` for a run's output type. Imported only by an agent
that has one, so an untyped agent never imports pydantic.
"""
