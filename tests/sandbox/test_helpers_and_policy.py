"""What a plan's code can touch holds no module, and the language policy reads every node of Python
3.11's grammar, refusing what it does not know."""

import ast

import pytest

from sandbox import policy
from sandbox.runner import run_code

DANGEROUS_MODULES = ("os", "sys", "ctypes", "subprocess", "posix", "builtins", "importlib")


def test_the_helpers_globals_hold_no_module_and_nothing_of_the_child():
    code = """
import types
names = []
for helper in (get_current_balance, next_transaction_id):
    for key, value in helper.__globals__.items():
        if isinstance(value, types.ModuleType) or key in ("wall", "json", "run_walled", "pid_one"):
            names.append(key)
    for key, value in helper.__globals__["__builtins__"].items():
        if isinstance(value, types.ModuleType) or key in ("__import__", "open", "eval", "exec"):
            names.append(key)
answer_text = ",".join(names)
"""
    result = run_code(code, tables={}, unsafe_disable_language_policy=True)
    assert result.status == "ok", result
    assert result.answer_text == ""


def test_nothing_in_the_plans_namespace_is_a_dangerous_module_or_leads_to_one_by_attribute():
    code = f"""
import types
reached = []
names = ["db", "Query", "where", "get_current_balance", "next_transaction_id", "inventory_tbl", "user_request"]
for name in names:
    value = globals()[name]
    for attribute in dir(value):
        try:
            found = getattr(value, attribute)
        except Exception:
            continue
        if isinstance(found, types.ModuleType) and found.__name__ in {DANGEROUS_MODULES!r}:
            reached.append(name + "." + attribute)
answer_text = ",".join(reached)
"""
    result = run_code(code, tables={"inventory": [{"name": "Aviator"}]}, unsafe_disable_language_policy=True)
    assert result.status == "ok", result
    assert result.answer_text == ""


def test_the_helpers_still_compute_balances_and_ids():
    tables = {"transactions": [{"transaction_id": "TXN007", "balance_after_transaction": 12.5}]}
    code = "answer_text = f'{get_current_balance(transactions_tbl)} {next_transaction_id(transactions_tbl)} {next_transaction_id(transactions_tbl, prefix=\"RET\")}'"
    assert run_code(code, tables=tables).answer_text == "12.5 TXN008 RET001"


def test_an_imported_module_shows_no_module_and_cannot_be_changed():
    result = run_code("import json\ntry:\n    json.loads = None\nexcept AttributeError as error:\n    answer_text = str(error)", tables={})
    assert result.answer_text == "modules are read-only here"


def concrete_node_types() -> set[str]:
    abstract = {"AST", "mod", "stmt", "expr", "expr_context", "boolop", "operator", "unaryop", "cmpop"}
    abstract |= {"excepthandler", "pattern", "type_ignore", "slice"}
    deprecated = {"AugLoad", "AugStore", "Param", "Suite", "Index", "ExtSlice", "Num", "Str", "Bytes", "NameConstant", "Ellipsis"}
    found = {name for name in dir(ast) if isinstance(getattr(ast, name), type) and issubclass(getattr(ast, name), ast.AST)}
    return found - abstract - deprecated


def test_the_policy_knows_every_node_type_of_the_running_grammar():
    assert concrete_node_types() <= policy.KNOWN_NODES


def test_the_policy_refuses_a_node_type_it_does_not_know():
    class Novelty(ast.expr):
        _fields = ()

    tree = ast.parse("x = 1")
    tree.body[0].value = Novelty(lineno=1, col_offset=0)
    assert any("Novelty is not allowed" in violation for violation in policy.check_tree(tree))


MATCH_TRICKS = {
    "class pattern keyword with a dunder": "match x:\n    case object(__class__=c):\n        pass",
    "class pattern keyword reaching a frame": "match x:\n    case object(gi_frame=f):\n        pass",
    "class pattern keyword fetching format": "match x:\n    case str(format=f):\n        pass",
    "capture with as into a dunder": "match x:\n    case int() as __builtins__:\n        pass",
    "star capture into a dunder": "match x:\n    case [*__all__]:\n        pass",
    "mapping rest into a dunder": "match x:\n    case {**__builtins__}:\n        pass",
    "except as a dunder": "try:\n    pass\nexcept Exception as __builtins__:\n    pass",
    "import as a dunder": "import re as __loader__",
    "string.Formatter().vformat": "import string\nstring.Formatter().vformat('{0}', (1,), {})",
    "typing.get_type_hints": "import typing\ntyping.get_type_hints(x)",
}


@pytest.mark.parametrize("code", MATCH_TRICKS.values(), ids=MATCH_TRICKS.keys())
def test_the_policy_refuses_names_hidden_in_patterns_and_bindings(code):
    assert policy.check(code)


def test_ordinary_match_statements_are_allowed():
    code = "match {'op': 'buy', 'qty': 3}:\n    case {'op': 'buy', **rest}:\n        answer_text = str(rest)\n    case [first, *others]:\n        pass\n    case str() as text:\n        pass"
    assert policy.check(code) == []
    assert run_code(code, tables={}).answer_text == "{'qty': 3}"
