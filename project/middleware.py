"""Requests the database could never store are refused at the door."""

from django.http import HttpResponseBadRequest, JsonResponse


def refuse_nul_characters(get_response):
    """A NUL in the path or the query string reaches a lookup that PostgreSQL refuses with an error (a
    500). No plan, step or filter can contain one, so the request is answered 400 before any view runs.
    (Form and JSON bodies are checked field by field by core.text, with a message naming the field.)"""

    def middleware(request):
        if "\x00" in request.path or "\x00" in request.META.get("QUERY_STRING", "") or "%00" in request.META.get("QUERY_STRING", ""):
            message = "The address contains a NUL character, which nothing here can hold."
            if request.path.startswith("/api/"):
                return JsonResponse({"detail": message}, status=400)
            return HttpResponseBadRequest(message)
        return get_response(request)

    return middleware
