from django.utils.functional import SimpleLazyObject

from core.roles import roles_of
from planning.selectors import waiting_gates


def roles(request):
    """Expose the user's roles so templates hide what the user cannot do (the server still checks), and
    for approvers the number of runtime gates waiting (the nav badge; counted only when a page shows it)."""
    user = getattr(request, "user", None)
    user_roles = roles_of(user) if user is not None else frozenset()
    waiting = SimpleLazyObject(lambda: waiting_gates().count()) if "approve" in user_roles else 0
    return {"roles": user_roles, "gates_waiting": waiting}
