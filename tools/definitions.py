"""What Countersign makes of an MCP tool's definition: its risk tier, and a pydantic model of its input
schema so plans are checked (and templates left alone) exactly like built-in tools' arguments.

Annotations are hints written by the server. They set the tier only for a trusted source; an untrusted
source's tools are HIGH and non-idempotent whatever they claim; an admin override beats both."""

from dataclasses import dataclass
from typing import Any, Literal, Union

import jsonschema
from pydantic import ConfigDict, Field, create_model, model_validator

from core.risk import DEFAULT_RISK, Risk

JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list, "object": dict, "null": None}


@dataclass(frozen=True)
class Assessment:
    risk: Risk
    reason: str
    idempotent: bool


def assess(
    *, trusted: bool, annotations: dict, risk_override: str = "", idempotent_override: bool | None = None, override_reason: str = ""
) -> Assessment:
    derived = (
        _from_annotations(annotations) if trusted else Assessment(DEFAULT_RISK, "untrusted source: its annotations are ignored", False)
    )
    if not risk_override and idempotent_override is None:
        return derived
    return Assessment(
        Risk(risk_override) if risk_override else derived.risk,
        f"admin override: {override_reason}",
        derived.idempotent if idempotent_override is None else idempotent_override,
    )


def _from_annotations(annotations: dict) -> Assessment:
    idempotent = annotations.get("idempotentHint") is True
    if annotations.get("readOnlyHint") is True:
        return Assessment(Risk.LOW, "trusted source: readOnlyHint", idempotent)
    if annotations.get("destructiveHint") is False:
        return Assessment(Risk.MEDIUM, "trusted source: a write, destructiveHint false", idempotent)
    if "destructiveHint" in annotations:
        return Assessment(Risk.HIGH, "trusted source: destructiveHint", idempotent)
    return Assessment(DEFAULT_RISK, "trusted source, no annotations: destructive by default", idempotent)


def _python_type(schema: dict) -> Any:
    if "enum" in schema and schema["enum"]:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        members = [JSON_TYPES.get(k, Any) for k in kind]
        return Union[tuple(type(None) if m is None else m for m in members)]  # noqa: UP007 (built at run time)
    if kind in JSON_TYPES and kind != "null":
        return JSON_TYPES[kind]
    return Any


def args_model_from_schema(name: str, schema: dict):
    """A pydantic model whose fields follow the schema's top-level properties (errors keep their field
    names, so a template in a typed field is left to run time), plus a full JSON Schema check."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    fields = {}
    for key, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        annotation = _python_type(spec)
        if key in required:
            fields[key] = (annotation, Field(description=spec.get("description")))
        else:
            fields[key] = (annotation | None, Field(default=spec.get("default"), description=spec.get("description")))
    extra = "allow" if schema.get("additionalProperties") is True else "forbid"
    validator = jsonschema.Draft202012Validator(schema) if _is_valid_schema(schema) else None

    def check_schema(model):
        # After the fields: their errors name the field (so a template there is left to run time).
        data = model.model_dump(exclude_unset=True)
        if validator is not None and not _has_template(data):
            error = jsonschema.exceptions.best_match(validator.iter_errors(data))
            if error is not None:
                raise ValueError(f"does not match the tool's input schema: {error.message}")
        return model

    return create_model(
        f"{name}_args",
        __config__=ConfigDict(extra=extra, str_max_length=20_000),
        __validators__={"check_schema": model_validator(mode="after")(check_schema)},
        **fields,
    )


def _is_valid_schema(schema: dict) -> bool:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError:
        return False
    return True


def _has_template(value: Any) -> bool:
    if isinstance(value, str):
        return "{{" in value
    if isinstance(value, dict):
        return any(_has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_template(v) for v in value)
    return False
