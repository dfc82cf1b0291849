"""The API's error answers: a request the real API refuses is refused here with the same status,
`type`, `param` and `code`, so a client's error handling is tested against what it will meet."""
from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A refused request: raised by validation, answered by the service as the API answers it."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None, status: int = 400,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message, self.param, self.code, self.status, self.kind = message, param, code, status, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def invalid(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    """A 400 `invalid_request_error`."""
    return ApiError(message, param, code)
