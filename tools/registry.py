"""The tool registry: the one source of what a plan may call and how risky each call is.

A tool is a typed Python function. Its argument schema comes from the type hints through pydantic, its
risk tier from the decorator (never from a planner's output), and a tool that declares no tier is HIGH.
Tools can also be registered at run time (for example from an MCP server) with `registry.register`.
"""

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from core.canonical import sha256_of
from core.risk import DEFAULT_RISK, Risk


class ToolError(Exception):
    """A tool refused or failed in a way the operator should read (not a bug)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    func: Callable[..., Any]
    args_model: type[BaseModel]
    risk: Risk = DEFAULT_RISK
    idempotent: bool = False
    timeout_s: float = 30.0
    # Built-in tools have no source; a tool from an MCP server names it (and is called SOURCE.TOOL).
    source: str = ""
    risk_reason: str = ""
    annotations: dict = field(default_factory=dict)
    # Whether what the tool returns comes from a system of record the organisation controls (the store,
    # tables, tickets) or from the open world (a web page, a model, an email): untrusted data must not
    # steer a risky step unseen (planning/provenance.py). Unknown is untrusted.
    trusted_output: bool = False
    # Optional: output -> a one-line summary for the run's facts ledger (planning/ledger.py). A tool that
    # knows what matters in its output says so here, so long outputs need no LLM to summarise them.
    summary: Callable[[Any], str] | None = None

    def args_schema(self) -> dict:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def definition(self) -> dict:
        """What a plan's approval pins: the name, description, input schema and annotations."""
        return {"name": self.name, "description": self.description, "input_schema": self.args_schema(), "annotations": self.annotations}

    @cached_property
    def definition_hash(self) -> str:
        return sha256_of(self.definition())

    def validate_args(self, args: dict) -> dict:
        """Checked, defaults-filled arguments; raises pydantic.ValidationError."""
        return self.args_model.model_validate(args).model_dump()

    def call(self, args: dict) -> Any:
        return self.func(**self.validate_args(args))

    def catalogue_entry(self) -> dict:
        return {
            "name": self.name,
            "description": self.description,
            "risk": str(self.risk.value),
            "idempotent": self.idempotent,
            "timeout_s": self.timeout_s,
            "args_schema": self.args_schema(),
            "source": self.source,
            "risk_reason": self.risk_reason or f"declared {self.risk.value} in code",
            "definition_hash": self.definition_hash,
            "trusted_output": self.trusted_output,
        }


class ExternalTools(Protocol):
    """Where tools registered from outside the code come from (the database's MCP tools)."""

    def version(self) -> str:
        """Changes whenever the set of tools or any definition changes."""

    def load(self) -> list[Tool]: ...


class ToolRegistry:
    """Tools registered in code plus, when a source of external tools is attached, those it loads.
    External tools are loaded on first use and reloaded by `refresh()` when their version changed."""

    def __init__(self):
        self._tools: dict[str, Tool] = {}
        self._external: dict[str, Tool] = {}
        self._external_source: ExternalTools | None = None
        self._external_version: str | None = None
        self._lock = threading.Lock()

    def attach(self, source: ExternalTools) -> None:
        self._external_source, self._external_version = source, None

    def refresh(self) -> None:
        """Reload the external tools if their version changed (one small query when it did not)."""
        if self._external_source is None:
            return
        version = self._external_source.version()
        if version != self._external_version:
            loaded = {tool.name: tool for tool in self._external_source.load() if tool.name not in self._tools}
            with self._lock:
                self._external, self._external_version = loaded, version

    def invalidate(self) -> None:
        self._external_version = None

    def _all_tools(self) -> dict[str, Tool]:
        if self._external_source is not None and self._external_version is None:
            self.refresh()
        return {**self._external, **self._tools} if self._external else self._tools

    def register(self, tool: Tool, *, replace: bool = False) -> Tool:
        with self._lock:
            if tool.name in self._tools and not replace:
                raise ValueError(f"A tool named {tool.name!r} is already registered.")
            self._tools[tool.name] = tool
        return tool

    def unregister(self, name: str) -> None:
        with self._lock:
            self._tools.pop(name, None)

    def get(self, name: str) -> Tool | None:
        return self._all_tools().get(name)

    def builtin(self, name: str) -> Tool | None:
        """A tool registered in code (not loaded from outside)."""
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._all_tools())

    def all(self) -> list[Tool]:
        tools = self._all_tools()
        return [tools[name] for name in sorted(tools)]

    def risk_of(self, name: str) -> Risk:
        tool = self.get(name)
        return tool.risk if tool is not None else DEFAULT_RISK


registry = ToolRegistry()


def args_model_for(func: Callable, name: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(func).parameters.values():
        if parameter.annotation is inspect.Parameter.empty:
            raise TypeError(f"Tool {name}: parameter {parameter.name!r} needs a type hint.")
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[parameter.name] = (parameter.annotation, default)
    # Unknown arguments are refused rather than silently dropped: a typo in a plan must be visible.
    config = ConfigDict(extra="forbid", str_max_length=20_000)
    return create_model(f"{name}_args", __config__=config, **fields)


def tool(
    name: str | None = None,
    *,
    risk: Risk | None = None,
    idempotent: bool = False,
    timeout_s: float = 30.0,
    description: str | None = None,
    into: ToolRegistry | None = None,
    trusted_output: bool = False,
    summary: Callable[[Any], str] | None = None,
):
    """Register a typed function as a tool. `risk=None` means undeclared, which is HIGH; an output not
    declared trusted is untrusted."""

    def decorate(func: Callable) -> Callable:
        tool_name = name or func.__name__
        text = description or inspect.cleandoc(func.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        (into or registry).register(
            Tool(
                name=tool_name,
                description=text,
                func=func,
                args_model=args_model_for(func, tool_name),
                risk=risk if risk is not None else DEFAULT_RISK,
                idempotent=idempotent,
                timeout_s=timeout_s,
                trusted_output=trusted_output,
                summary=summary,
            )
        )
        return func

    return decorate


def readable_validation_errors(error: ValidationError) -> list[str]:
    messages = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        messages.append(f"{where}: {item['msg']}")
    return messages
