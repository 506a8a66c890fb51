"""The language policy: what LLM-written code may say, checked on its syntax tree before anything runs.

This is the first of two walls. It refuses imports outside a short allowlist, every name or attribute
that starts with an underscore (dunders and private internals), the attributes that walk from a value to
a frame, code object or traceback, `str.format`-style attribute access, dynamic evaluation, and
metaclasses. The second wall is the operating system (sandbox.child): even code that slipped past this
check cannot open files, make sockets, start processes or use the network.
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


def _violations(node: ast.AST):
    line = getattr(node, "lineno", "?")
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name.split(".")[0] not in ALLOWED_IMPORTS or alias.name != alias.name.split(".")[0]:
                yield f"Line {line}: import of {alias.name!r} is not allowed (allowed: {', '.join(sorted(ALLOWED_IMPORTS))})."
    elif isinstance(node, ast.ImportFrom):
        if node.level or (node.module or "") not in ALLOWED_IMPORTS:
            yield f"Line {line}: import from {node.module or '.'!r} is not allowed."
        for alias in node.names:
            if alias.name == "*" or alias.name.startswith("_"):
                yield f"Line {line}: importing {alias.name!r} is not allowed."
    elif isinstance(node, ast.Name):
        if node.id.startswith("_") and node.id != "_":  # a bare _ is the usual throwaway name
            yield f"Line {line}: names starting with an underscore ({node.id}) are not allowed."
        elif node.id in DENIED_NAMES:
            yield f"Line {line}: {node.id} is not allowed."
    elif isinstance(node, ast.Attribute):
        if node.attr == "format" and not _safe_format_literal(node.value):
            yield f"Line {line}: .format() is only allowed on a string literal without attribute or index fields (use an f-string)."
        elif node.attr.startswith("_"):
            yield f"Line {line}: attribute {node.attr!r} is not allowed (no underscore attributes)."
        elif node.attr in DENIED_ATTRIBUTES:
            yield f"Line {line}: attribute {node.attr!r} is not allowed."
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        name = getattr(node, "name", "")
        if name.startswith("_") or name in DENIED_NAMES:
            yield f"Line {line}: the name {name!r} is not allowed."
        if isinstance(node, ast.ClassDef):
            if node.keywords:
                yield f"Line {line}: class keywords (metaclasses) are not allowed."
            return
        arguments = node.args
        for argument in (
            arguments.posonlyargs + arguments.args + arguments.kwonlyargs + [a for a in (arguments.vararg, arguments.kwarg) if a]
        ):
            if argument.arg.startswith("_"):
                yield f"Line {line}: parameter names starting with an underscore are not allowed."
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        for name in node.names:
            if name.startswith("_"):
                yield f"Line {line}: {name} is not allowed."
    elif isinstance(node, ast.keyword) and node.arg and node.arg.startswith("_"):
        yield f"Line {line}: keyword {node.arg!r} is not allowed."
    elif isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
        yield f"Line {line}: async code is not allowed."


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
