"""The language policy: what LLM-written code may say, checked on its syntax tree before anything runs.

A courtesy, not the wall: it turns the obvious mistakes and tricks into readable refusals before a process
is started. It refuses imports outside a short allowlist, every name, attribute, parameter, keyword and
match-pattern name that starts with an underscore (dunders and private internals), the attributes that walk
from a value to a frame, code object or traceback, `str.format`-style attribute access, dynamic evaluation,
metaclasses, async code, and any syntax node it does not know. The wall is the operating system
(sandbox/wall.py): code that slipped past this check still cannot open files, make sockets, start
processes, see other processes or use the network.
"""

import ast
import re
import string

MAX_CODE_CHARS = 50_000

ALLOWED_IMPORTS = frozenset(
    {
        "re",
        "json",
        "datetime",
        "math",
        "decimal",
        "collections",
        "itertools",
        "functools",
        "string",
        "statistics",
        "random",
        "time",
        "typing",
        "tinydb",
    }
)

DENIED_NAMES = frozenset(
    {
        "eval", "exec", "compile", "open", "input", "breakpoint", "help", "globals", "locals", "vars", "dir",
        "getattr", "setattr", "delattr", "hasattr", "type", "object", "memoryview", "classmethod", "staticmethod",
        "property", "super", "exit", "quit", "copyright", "credits", "license",
    }
)  # fmt: skip

# Attributes that lead from ordinary values to interpreter internals without a leading underscore.
DENIED_ATTRIBUTES = frozenset(
    {
        "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code",
        "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "tb_frame", "tb_next", "tb_lasti",
        "co_code", "co_consts", "co_names", "func_globals", "func_code", "mro", "format_map",
        "with_traceback", "modules", "system", "popen", "spawn", "load_module", "exec_module",
        "get_type_hints", "ForwardRef", "evaluate",
    }
)  # fmt: skip

CODING_COOKIE = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.MULTILINE)


def check(code: str) -> list[str]:
    """Every violation, as readable sentences; an empty list means the code may run."""
    if len(code) > MAX_CODE_CHARS:
        return [f"The code is longer than {MAX_CODE_CHARS} characters."]
    first_lines = "\n".join(code.splitlines()[:2])
    if CODING_COOKIE.search(first_lines):
        return ["Source encoding declarations are not allowed."]
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as error:
        return [f"Syntax error on line {error.lineno}: {error.msg}."]
    except (ValueError, RecursionError, MemoryError) as error:
        return [f"The code cannot be parsed: {type(error).__name__}."]
    return check_tree(tree)


def check_tree(tree: ast.AST) -> list[str]:
    violations: list[str] = []
    for node in ast.walk(tree):
        violations.extend(_violations(node))
    return list(dict.fromkeys(violations))[:20]


def _safe_format_literal(value: ast.AST) -> bool:
    """'{} costs {:.2f}'.format(...) is fine; '{0.__class__}'.format(...) walks attributes."""
    if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
        return False
    try:
        fields = [field for _, field, spec, _ in string.Formatter().parse(value.value) if field is not None]
        specs = [spec for _, field, spec, _ in string.Formatter().parse(value.value) if spec]
    except ValueError:
        return False
    return not any("." in field or "[" in field for field in fields) and not any("{" in spec for spec in specs)


# Every node type of Python 3.11's grammar (Lib/ast.py, Parser/Python.asdl). A node of any other type is
# refused: a newer grammar must be read before it is trusted.
KNOWN_NODES = frozenset(
    """
    Module Interactive Expression FunctionType
    FunctionDef AsyncFunctionDef ClassDef Return Delete Assign AugAssign AnnAssign For AsyncFor While If With
    AsyncWith Match Raise Try TryStar Assert Import ImportFrom Global Nonlocal Expr Pass Break Continue
    BoolOp NamedExpr BinOp UnaryOp Lambda IfExp Dict Set ListComp SetComp DictComp GeneratorExp Await Yield
    YieldFrom Compare Call FormattedValue JoinedStr Constant Attribute Subscript Starred Name List Tuple Slice
    Load Store Del And Or Add Sub Mult MatMult Div Mod Pow LShift RShift BitOr BitXor BitAnd FloorDiv
    Invert Not UAdd USub Eq NotEq Lt LtE Gt GtE Is IsNot In NotIn
    comprehension ExceptHandler arguments arg keyword alias withitem match_case
    MatchValue MatchSingleton MatchSequence MatchMapping MatchClass MatchStar MatchAs MatchOr TypeIgnore
    """.split()
)
ASYNC_NODES = ("AsyncFunctionDef", "Await", "AsyncFor", "AsyncWith")
# str.format and its relatives read attributes named inside a string, out of the policy's sight.
FORMAT_ATTRIBUTES = frozenset({"format", "format_map", "vformat", "get_field", "get_value"})


def _violations(node: ast.AST):
    line = getattr(node, "lineno", "?")
    kind = type(node).__name__
    if kind not in KNOWN_NODES:
        yield f"Line {line}: the syntax {kind} is not allowed (the policy does not know it)."
        return
    if kind in ASYNC_NODES:
        yield f"Line {line}: async code is not allowed."
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] not in ALLOWED_IMPORTS or alias.name != alias.name.split(".")[0]:
                yield f"Line {line}: import of {alias.name!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})."
            yield from _bound_name(alias.asname, line)
    elif isinstance(node, ast.ImportFrom):
        if node.level or (node.module or "") not in ALLOWED_IMPORTS:
            yield f"Line {line}: import from {node.module or '.'!r} is not allowed."
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_") or alias.name in DENIED_ATTRIBUTES | FORMAT_ATTRIBUTES:
                yield f"Line {line}: importing {alias.name!r} is not allowed."
            yield from _bound_name(alias.asname, line)
    elif isinstance(node, ast.Name):
        yield from _bound_name(node.id, line)
    elif isinstance(node, ast.Attribute):
        if node.attr == "format" and _safe_format_literal(node.value):
            return
        yield from _attribute(node.attr, line)
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield from _bound_name(node.name, line)
        if isinstance(node, ast.ClassDef) and node.keywords:
            yield f"Line {line}: class keywords (metaclasses) are not allowed."
    elif isinstance(node, ast.arg):
        if node.arg.startswith("_"):
            yield f"Line {line}: parameter names starting with an underscore are not allowed."
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        for name in node.names:
            yield from _bound_name(name, line)
    elif isinstance(node, ast.keyword):
        if node.arg and node.arg.startswith("_"):
            yield f"Line {line}: keyword {node.arg!r} is not allowed."
    elif isinstance(node, ast.ExceptHandler):
        yield from _bound_name(node.name, line)
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)):
        yield from _bound_name(node.name, line)
    elif isinstance(node, ast.MatchMapping):
        yield from _bound_name(node.rest, line)
    elif isinstance(node, ast.MatchClass):
        # `case C(attr=x)` reads the attribute `attr` of the subject: the names are attributes, as strings.
        for attribute in node.kwd_attrs:
            yield from _attribute(attribute, line)


def _bound_name(name: str | None, line) -> list[str]:
    if not name:
        return []
    if name.startswith("_") and name != "_":  # a bare _ is the usual throwaway name
        return [f"Line {line}: names starting with an underscore ({name}) are not allowed."]
    if name in DENIED_NAMES:
        return [f"Line {line}: {name} is not allowed."]
    return []


def _attribute(name: str, line) -> list[str]:
    if name in FORMAT_ATTRIBUTES:
        return [
            f"Line {line}: .{name}() is only allowed as .format on a string literal without attribute or index fields (use an f-string)."
        ]
    if name.startswith("_"):
        return [f"Line {line}: attribute {name!r} is not allowed (no underscore attributes)."]
    if name in DENIED_ATTRIBUTES:
        return [f"Line {line}: attribute {name!r} is not allowed."]
    return []


def imported_modules(code: str) -> list[str]:
    """The allowed modules the code imports, so the sandbox child can load exactly those in advance."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return sorted(names & ALLOWED_IMPORTS)
