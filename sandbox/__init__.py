"""Code as plan: LLM-written Python, checked and run in isolation; its changes come back as a diff.

A leaf: it imports neither planning nor approvals."""
