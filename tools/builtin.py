"""Importing this module registers every built-in tool."""

from tools import code, general, oncall, store  # noqa: F401
