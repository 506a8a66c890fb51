"""Turn a pydantic JSON schema into one OpenAI's strict structured-output mode accepts.

Strict mode wants every object closed (`additionalProperties: false`) with every property required, so
an optional property becomes nullable; it refuses keywords such as `default`, `format`, `minLength`,
`oneOf` and `allOf`, and schemas without a type. Validation keywords are dropped here on purpose: the
plan validator checks them afterwards, the strict schema only shapes the answer.
"""

import copy

KEPT = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "$ref", "description", "title"}
SCALARS = {"string", "integer", "number", "boolean", "null"}


class NotStrictable(ValueError):
    """The schema has a part strict mode cannot express (a free-form object, a tuple, an untyped value)."""


def strict_object_schema(schema: dict, *, defs_prefix: str = "", templates: bool = False) -> tuple[dict, dict]:
    """(the strict schema of an object, the strict `$defs` it refers to, renamed with `defs_prefix`).
    `templates`: non-string values also accept a string, so a whole "{{ steps.s1.output }}" template
    can stand for a value only known at run time."""
    defs = schema.get("$defs", {})
    converter = _Converter(defs, defs_prefix, templates)
    root = converter.convert({k: v for k, v in schema.items() if k != "$defs"}, top=True)
    if root.get("type") != "object":
        raise NotStrictable("the root is not an object")
    return root, converter.out_defs


class _Converter:
    def __init__(self, defs: dict, prefix: str, templates: bool):
        self.defs, self.prefix, self.templates = defs, prefix, templates
        self.out_defs: dict[str, dict] = {}

    def convert(self, schema: dict, *, top: bool = False) -> dict:
        schema = copy.deepcopy(schema)
        if "$ref" in schema:
            return {"$ref": self._ref(schema["$ref"])}
        if "oneOf" in schema:
            schema["anyOf"] = schema.pop("oneOf")
        if "allOf" in schema:
            parts = schema.pop("allOf")
            if len(parts) != 1:
                raise NotStrictable("allOf with more than one schema")
            schema = {**parts[0], **schema}
            if "$ref" in schema:
                return {"$ref": self._ref(schema["$ref"])}
        if "anyOf" in schema:
            branches = []
            for part in schema["anyOf"]:
                converted = self.convert(part)
                # Flattened: a template alternative inside a nullable value would nest one anyOf in another.
                for branch in converted["anyOf"] if set(converted) == {"anyOf"} else [converted]:
                    branches += [branch] if branch not in branches else []
            return self._keep({**schema, "anyOf": branches}, without="type")
        kind = schema.get("type")
        if kind == "object" or "properties" in schema:
            return self._object(schema, top)
        if kind == "array":
            if not isinstance(schema.get("items"), dict) or not schema["items"]:
                raise NotStrictable("an array without an item schema")
            return self._with_template(self._keep({**schema, "items": self.convert(schema["items"])}))
        if "enum" in schema or "const" in schema:
            return self._keep(schema)
        kinds = kind if isinstance(kind, list) else [kind]
        if not kinds or not set(kinds) <= SCALARS:
            raise NotStrictable(f"a value without a usable type ({kind!r})")
        return self._with_template(self._keep(schema))

    def _object(self, schema: dict, top: bool) -> dict:
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if not properties or extra not in (None, False):
            raise NotStrictable("a free-form object")
        required = set(schema.get("required", []))
        converted = {}
        for name, child in properties.items():
            value = self.convert(child)
            converted[name] = value if name in required else nullable(value)
        out = self._keep({**schema, "type": "object", "properties": converted, "required": list(properties), "additionalProperties": False})
        return out if top else self._with_template(out)

    def _ref(self, ref: str) -> str:
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith("#/$defs/") or name not in self.defs:
            raise NotStrictable(f"a reference that does not resolve: {ref}")
        new = self.prefix + name
        if new not in self.out_defs:
            self.out_defs[new] = {}  # placeholder first: a recursive model refers to itself
            self.out_defs[new] = self.convert(self.defs[name])
        return f"#/$defs/{new}"

    def _with_template(self, schema: dict) -> dict:
        if not self.templates or _accepts_string(schema) or schema.get("type") == "null":
            return schema
        return {"anyOf": [schema, {"type": "string", "description": "A whole template such as {{ steps.s1.output }}"}]}

    @staticmethod
    def _keep(schema: dict, without: str = "") -> dict:
        return {k: v for k, v in schema.items() if k in KEPT and k != without}


def _accepts_string(schema: dict) -> bool:
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return True  # an enum keeps its listed values: a template there is an edit for a person
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def nullable(schema: dict) -> dict:
    """The schema, also accepting null (strict mode's way of saying optional)."""
    kind = schema.get("type")
    if "anyOf" in schema:
        branches = schema["anyOf"]
        return schema if {"type": "null"} in branches else {**schema, "anyOf": [*branches, {"type": "null"}]}
    if "$ref" in schema or "enum" in schema or "const" in schema:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(kind, str):
        return schema if kind == "null" else {**schema, "type": [kind, "null"]}
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}
