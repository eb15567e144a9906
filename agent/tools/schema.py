"""A tool's argument JSON schema straight from its signature, for the plain types tools use.

pydantic builds the same schema from a model made for the signature, but `create_model` plus
`model_json_schema` cost ~1 ms per tool, paid by every process at start-up for ~40 tools
(a one-shot `tapebot chat -m` pays it for a turn that may call none). This writes the schema pydantic
writes, key for key and in the same order, for: str, int, float, bool, `list[X]`, `dict[str, X]`,
`dict[str, Any]`, string `Literal`s, `X | None`, with plain JSON defaults. Anything else raises
`Unsupported` and the registry asks pydantic. tests/perf/test_perf_tool_schema.py holds the two
byte-identical for every registered tool and for generated signatures.
"""

from __future__ import annotations

import math
import types
from typing import Any, Literal, Union, get_args, get_origin

_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


class Unsupported(Exception):
    """The annotation or default is outside the plain subset: pydantic writes this schema."""


def type_schema(ann: Any) -> dict[str, Any]:
    """The schema of one annotation; keys in pydantic's (sorted) order."""
    scalar = _SCALARS.get(ann) if isinstance(ann, type) else None
    if scalar is not None:
        return {"type": scalar}
    origin = get_origin(ann)
    args = get_args(ann)
    if origin is Literal:
        if len(args) >= 2 and all(type(a) is str for a in args) and len(set(args)) == len(args):
            return {"enum": list(args), "type": "string"}
        raise Unsupported(repr(ann))
    if origin is Union or origin is types.UnionType:
        if len(args) == 2 and args[1] is type(None) and args[0] is not type(None):
            return {"anyOf": [type_schema(args[0]), {"type": "null"}]}
        raise Unsupported(repr(ann))
    if origin is list and len(args) == 1:
        return {"items": type_schema(args[0]), "type": "array"}
    if origin is dict and len(args) == 2 and args[0] is str:
        values: Any = True if args[1] is Any else type_schema(args[1])
        return {"additionalProperties": values, "type": "object"}
    raise Unsupported(repr(ann))


def _json_default(value: Any) -> Any:
    """A default as pydantic writes it (tuples become lists); only plain JSON values."""
    if value is None or type(value) in (str, int, bool):
        return value
    if type(value) is float:
        if not math.isfinite(value):
            raise Unsupported(repr(value))
        return value
    if type(value) in (list, tuple):
        return [_json_default(v) for v in value]
    raise Unsupported(repr(value))


REQUIRED: Any = ...  # the default of a parameter without one (pydantic's `Field(...)`)


def arguments_schema(fields: dict[str, tuple[Any, Any, str | None]]) -> dict[str, Any]:
    """{name: (annotation, default or REQUIRED, description)} → the arguments' object schema, as
    `registry._schema_of` makes it from pydantic's (extra="forbid", titles dropped)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, (ann, default, description) in fields.items():
        if name.startswith(("_", "model_")):  # pydantic's own rules for these names apply
            raise Unsupported(name)
        prop = type_schema(ann)
        if default is REQUIRED:
            required.append(name)
        else:
            prop["default"] = _json_default(default)
        if description:
            prop["description"] = description
        properties[name] = dict(sorted(prop.items()))
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    return schema
