"""Code-as-plan drafting: the LLM writes one <execute_python> block, following the seed lab's prompt
contract (answer_text and STATUS, parameters from user_request, one transaction row per item, no change
at all when stock is short, read-only when intent is unclear)."""

import json
import re

from django.conf import settings

from core import llm
from planning.planner import Draft, PlanningFailed
from planning.validation import PlanInvalid, validate_plan
from sandbox import policy
from sandbox.models import DataRow

CODE_TOOL = "python_sandbox"
DEFAULT_TABLES = ["inventory", "transactions"]
BLOCK = re.compile(r"<execute_python>\s*(.*?)\s*</execute_python>", re.DOTALL)
FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)

CODE_PROMPT = """You are a senior data assistant. PLAN BY WRITING PYTHON CODE USING TINYDB.

Database Schema & Samples (read-only):
{schema_block}

Execution Environment (already imported/provided):
- Variables: db, {table_variables}  # TinyDB Table objects
- Helpers: get_current_balance(tbl) -> float, next_transaction_id(tbl, prefix="TXN") -> str
- Query and where from tinydb are available; standard modules: re, json, datetime, math, decimal, collections, itertools, functools, string, statistics.
- Natural language: user_request: str  # the original user message

PLANNING RULES (critical):
- Derive ALL filters/parameters from user_request (shape/keywords, price ranges "under/over/between", stock mentions,
  quantities, buy/return intent). Do NOT hard-code values.
- Build TinyDB queries dynamically with Query(). If a constraint isn't in user_request, don't apply it.
- Be conservative: if intent is ambiguous, do read-only (DRY RUN).

TRANSACTION POLICY (hard):
- Do NOT create aggregated multi-item transactions.
- If the request contains multiple items, create a separate transaction row PER ITEM.
- For each item: compute its own line total (unit_price * qty), insert ONE transaction with that amount,
  update balance sequentially (balance += line_total), update the item's stock.
- If any requested item lacks sufficient stock, do NOT mutate anything; reply with STATUS="insufficient_stock".

HUMAN RESPONSE REQUIREMENT (hard):
- You MUST set a variable named `answer_text` (type str) with a short, customer-friendly sentence (1-2 lines).
- If nothing matches, politely say so and offer a nearby alternative (closest style/price) or a next step.

FAILURE & EDGE-CASE HANDLING (must implement):
- Do not capture outer variables in Query.test. Pass them as explicit args.
- Always set `answer_text` and a string `STATUS`: "success", "no_match", "insufficient_stock", "invalid_request", "unsupported_intent".
- Names starting with an underscore, eval/exec/open/getattr, and imports beyond the modules above are refused.

OUTPUT CONTRACT:
- Return ONLY executable Python between these tags (no extra text):
  <execute_python>
  # your python
  </execute_python>

User request:
{question}
"""


def schema_block(table_names: list[str]) -> str:
    lines = []
    rows_by_table: dict[str, list[dict]] = {name: [] for name in table_names}
    for table, data in DataRow.objects.filter(table__name__in=table_names).order_by("id").values_list("table__name", "data"):
        rows_by_table[table].append(data)
    for name in table_names:
        rows = rows_by_table[name]
        # Sorted: PostgreSQL's jsonb does not keep key order, and the prompt should not depend on the database.
        fields = dict(sorted({key: type(value).__name__ for row in rows[:20] for key, value in row.items()}.items()))
        lines.append(f"Table {name}_tbl: " + ", ".join(f"{key} ({kind})" for key, kind in fields.items()))
        lines.append("Samples: " + json.dumps(rows[:3], ensure_ascii=False))
    return "\n".join(lines)


def extract_code(content: str) -> str:
    found = BLOCK.search(content) or FENCE.search(content)
    if not found or not found.group(1).strip():
        raise ValueError("no code between <execute_python> and </execute_python> tags")
    return found.group(1).strip() + "\n"


def code_step(code: str, goal_text: str, tables: list[str]) -> dict:
    return {
        "key": "code",
        "title": "Python plan (runs in the sandbox; its changes wait for approval)",
        "description": "LLM-written code. A dry run shows what it would change before anyone approves.",
        "tool": CODE_TOOL,
        "args": {"code": code, "tables": tables, "user_request": goal_text},
        "depends_on": [],
        "condition": "",
        "success_criteria": "answer_text and STATUS are set; the diff matches the request.",
    }


def draft_code_plan(goal_text: str, *, tables: list[str] | None = None) -> Draft:

    tables = tables or DEFAULT_TABLES
    if not llm.is_configured():
        raise PlanningFailed("Code plans are written by an LLM; configure OPENAI_BASE_URL / OPENAI_API_KEY, or submit a step plan.")
    prompt = CODE_PROMPT.format(
        schema_block=schema_block(tables), table_variables=", ".join(f"{t}_tbl" for t in tables), question=goal_text
    )
    messages = [
        {"role": "system", "content": "You write safe, well-commented TinyDB code to handle data questions and updates."},
        {"role": "user", "content": prompt},
    ]
    draft = Draft(steps=[], planner="llm", source="", model=settings.COUNTERSIGN_PLANNER_MODEL)
    problems: list[str] = []
    for attempt in range(1 + max(0, settings.COUNTERSIGN_REPAIR_ROUNDS)):
        content = draft.ask(messages, temperature=0.2, purpose="code" if attempt == 0 else "repair")
        try:
            code = extract_code(content)
            problems = policy.check(code)
            if not problems:
                draft.steps = validate_plan({"steps": [code_step(code, goal_text, tables)]})
                draft.repairs = attempt
                return draft
        except ValueError as error:
            problems = [str(error)]
        except PlanInvalid as invalid:
            problems = [str(issue) for issue in invalid.issues]
        messages += [
            {"role": "assistant", "content": content[:20_000]},
            {
                "role": "user",
                "content": "That code cannot run here:\n- "
                + "\n- ".join(problems[:20])
                + "\nReturn the corrected code between <execute_python> tags.",
            },
        ]
    raise PlanningFailed("The LLM's code was still not runnable after repairs: " + "; ".join(problems[:5]))
