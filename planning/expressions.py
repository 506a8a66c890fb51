"""Step templates (`{{ steps.s1.output.count }}`) and conditions (`steps.s1.output > steps.s2.output`).

Conditions are parsed with `ast` and evaluated by walking an allowlist of node types: never `eval`. Only
comparisons, boolean logic, arithmetic on numbers, literals, `len(...)` and references into dependency
outputs are accepted.
"""

import ast
import operator
import re
from typing import Any

MAX_CONDITION_LENGTH = 500

TEMPLATE_RE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
REFERENCE_RE = re.compile(r"^\s*steps\.([A-Za-z][A-Za-z0-9_]*)\.output((?:\.[A-Za-z0-9_]+)*)\s*$")


class ExpressionError(ValueError):
    pass


# ---- templates -------------------------------------------------------------------------------------


def _strings_in(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings_in(item)


def template_refs(value: Any) -> set[str]:
    """Step keys referenced by templates anywhere in a JSON value; raises on a malformed template."""
    keys = set()
    for text in _strings_in(value):
        for inner in TEMPLATE_RE.findall(text):
            match = REFERENCE_RE.match(inner)
            if match is None:
                raise ExpressionError(f"Template {{{{{inner}}}}} must look like {{{{ steps.KEY.output.field }}}}.")
            keys.add(match.group(1))
    return keys


def is_whole_template(value: Any) -> bool:
    return isinstance(value, str) and TEMPLATE_RE.fullmatch(value.strip()) is not None


def _lookup(outputs: dict, key: str, path: str) -> Any:
    if key not in outputs:
        raise ExpressionError(f"Step {key} has no output yet.")
    value = outputs[key]
    for part in [p for p in path.split(".") if p]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise ExpressionError(f"steps.{key}.output{path} does not exist in the output.")
    return value


def resolve_templates(value: Any, outputs: dict) -> Any:
    """Replace templates with dependency outputs. A string that is one whole template takes the output's
    own type (a number stays a number); a template inside longer text is substituted as text."""
    if isinstance(value, dict):
        return {k: resolve_templates(v, outputs) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_templates(v, outputs) for v in value]
    if not isinstance(value, str):
        return value
    if is_whole_template(value):
        match = REFERENCE_RE.match(TEMPLATE_RE.fullmatch(value.strip()).group(1))
        return _lookup(outputs, match.group(1), match.group(2))

    def substitute(found):
        match = REFERENCE_RE.match(found.group(1))
        return str(_lookup(outputs, match.group(1), match.group(2)))

    return TEMPLATE_RE.sub(substitute, value)


# ---- conditions ------------------------------------------------------------------------------------

_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv, ast.Mod: operator.mod}
_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def parse_condition(text: str) -> ast.Expression:
    if len(text) > MAX_CONDITION_LENGTH:
        raise ExpressionError(f"Condition is longer than {MAX_CONDITION_LENGTH} characters.")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise ExpressionError(f"Condition is not a valid expression: {error.msg}.") from None
    _check(tree.body)
    return tree


def _reference_path(node: ast.AST) -> tuple[str, str] | None:
    """(key, .path) when node is steps.KEY.output[.more], else None."""
    parts = []
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
        else:
            if not isinstance(node.slice, ast.Constant) or not isinstance(node.slice.value, (str, int)):
                return None
            parts.append(str(node.slice.value))
        node = node.value
    if not (isinstance(node, ast.Name) and node.id == "steps"):
        return None
    parts.reverse()
    if len(parts) < 2 or parts[1] != "output" or any(part.startswith("_") for part in parts):
        return None
    return parts[0], "".join("." + p for p in parts[2:])


def _check(node: ast.AST) -> None:
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        if _reference_path(node) is None:
            raise ExpressionError("Only references like steps.s1.output or steps.s1.output.field are allowed.")
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub, ast.UAdd)):
        _check(node.operand)
    elif isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        _check(node.left)
        _check(node.right)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        _check(node.left)
        for comparator in node.comparators:
            _check(comparator)
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool, type(None))):
        pass
    elif isinstance(node, ast.Name) and node.id in _NAMES:
        pass
    elif isinstance(node, (ast.List, ast.Tuple)):
        for element in node.elts:
            _check(element)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
    ):
        _check(node.args[0])
    else:
        raise ExpressionError(f"{type(node).__name__} is not allowed in a condition.")


def condition_refs(text: str) -> set[str]:
    tree = parse_condition(text)
    keys = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            found = _reference_path(node)
            if found is not None:
                keys.add(found[0])
    return keys


def evaluate_condition(text: str, outputs: dict) -> bool:
    return bool(_evaluate(parse_condition(text).body, outputs))


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExpressionError(f"Arithmetic needs numbers, got {type(value).__name__}.")
    return value


def _evaluate(node: ast.AST, outputs: dict) -> Any:
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        key, path = _reference_path(node)
        return _lookup(outputs, key, path)
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(v, outputs) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        operand = _evaluate(node.operand, outputs)
        if isinstance(node.op, ast.Not):
            return not operand
        return -_number(operand) if isinstance(node.op, ast.USub) else _number(operand)
    if isinstance(node, ast.BinOp):
        left, right = _number(_evaluate(node.left, outputs)), _number(_evaluate(node.right, outputs))
        try:
            return _ARITHMETIC[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ExpressionError("Division by zero in condition.") from None
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, outputs)
        for op, comparator in zip(node.ops, node.comparators, strict=True):
            right = _evaluate(comparator, outputs)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError:
                raise ExpressionError(f"Cannot compare {type(left).__name__} with {type(right).__name__}.") from None
            left = right
        return True
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_evaluate(element, outputs) for element in node.elts]
    if isinstance(node, ast.Call):
        value = _evaluate(node.args[0], outputs)
        try:
            return len(value)
        except TypeError:
            raise ExpressionError(f"len() of {type(value).__name__}.") from None
    raise ExpressionError(f"{type(node).__name__} is not allowed in a condition.")
