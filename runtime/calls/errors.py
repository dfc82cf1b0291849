"""Which class an ENRICH call's error is in, and so whether RETRY calls again.

A retry sends (and pays for) the same request again; it is worth it only when the next answer
may differ. So every error an element meets is in one class (docs/runtime.md, "Errors"):

- `transient`: the service was busy or broken for a moment (5xx, 408, 425, 429, a connection
  reset, an error a user's Python function raised): RETRY calls again.
- `unreachable`: no connection could be made (connection refused, no such host): RETRY calls
  again, and a service that never answered stops the run (core/refusals.py).
- `credentials`: 401 or 403, the request's credentials were refused: not retried; refused
  calls with none answered stop the run (core/refusals.py).
- `request`: any other 4xx, a row that cannot make a request (a null placeholder), or a
  certificate the service's TLS connection fails (an untrusted CA, a wrong host name: the
  pipeline's CA or `verify` option is wrong, the service is up): the same request gets the same
  answer, not retried.
- `answer`: the service answered, but not with what RETURNS declares (a type that does not fit,
  a body that is not JSON, the wrong shape, a model's refusal or cut-short answer): not retried.

A `CallError` knows its class (`CallError.error_class`: set by the call that raised it, else read
from its HTTP status); any other exception's class is read from its type. Dead letters carry it
(`error_class`).
"""
from __future__ import annotations

import ssl

TRANSIENT = "transient"
UNREACHABLE = "unreachable"
CREDENTIALS = "credentials"
REQUEST = "request"
ANSWER = "answer"

#: the classes RETRY calls again for
RETRIED = frozenset((TRANSIENT, UNREACHABLE))

# 4xx answers that may change on the next try: 408 Request Timeout, 425 Too Early, 429 Too Many
# Requests (404 is no error: a miss)
_RETRIED_4XX = frozenset((408, 425, 429))

try:    # executors have aiohttp; a Python-only worker need not
    from aiohttp import ClientConnectorCertificateError, ClientConnectorError
    _NO_CONNECTION: tuple[type[BaseException], ...] = (ClientConnectorError, ConnectionRefusedError)
    _BAD_CERTIFICATE: tuple[type[BaseException], ...] = (ClientConnectorCertificateError, ssl.SSLCertVerificationError)
except ImportError:     # pragma: no cover
    _NO_CONNECTION = (ConnectionRefusedError,)
    _BAD_CERTIFICATE = (ssl.SSLCertVerificationError,)


def status_class(status: int) -> str:
    """The class of an HTTP status that is not an answer (not 2xx, not 404)."""
    if status in (401, 403):
        return CREDENTIALS
    if 400 <= status < 500 and status not in _RETRIED_4XX:
        return REQUEST
    return TRANSIENT


def error_class(exc: BaseException) -> str:
    """The class of the error `exc` (see the module's docstring)."""
    named = getattr(exc, "error_class", None)
    if isinstance(named, str):
        return named
    if isinstance(exc, _BAD_CERTIFICATE):     # a connection aiohttp counts as failed, but made
        return REQUEST
    if isinstance(exc, _NO_CONNECTION):
        return UNREACHABLE
    return TRANSIENT


def retried(exc: BaseException) -> bool:
    """True when RETRY may call again after `exc`."""
    return error_class(exc) in RETRIED
