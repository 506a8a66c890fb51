from core.roles import roles_of


def roles(request):
    """Expose the user's roles so templates hide what the user cannot do (the server still checks)."""
    user = getattr(request, "user", None)
    return {"roles": roles_of(user) if user is not None else frozenset()}
