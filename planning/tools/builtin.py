"""Importing this module registers every built-in tool."""

from planning.tools import general, oncall, store  # noqa: F401
