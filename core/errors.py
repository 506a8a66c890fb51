"""The one exception every service raises to refuse an operation; views and the API turn it into a
message and an HTTP status."""


class ServiceError(Exception):
    """A refused operation; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
