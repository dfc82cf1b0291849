"""`${NAME}` secrets: found in a call's templates, read once by the process that starts the job,
carried to the executors inside the operator's configuration, and masked wherever text leaves.

Any kind of call uses the same plumbing: a config field (URL, header value, a model's base URL...)
holds `${NAME}` as written; `secret_names` finds the names in any config object; the job's driver
reads the values with `read` before Spark starts; `run_chain` attaches them to each operator
(`C.Enrich.secrets`), so they travel in the pickled chain to executors that have no environment of
their own (a standalone cluster, a Spark Connect server); the call fills its templates with
`Secrets.fill` and every error it raises passes `Secrets.mask`.

The compiler imports this module, so it imports nothing else of the runtime.
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import urllib.parse
from collections.abc import Iterator, Mapping

from dslc.runtime import run_env

#: `${...}`: what is inside is checked by `bad_names` (the compiler reports it at its column).
SECRET = re.compile(r"\$\{([^{}]*)\}")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Where the job's driver finds the file given to `dslc run --secrets FILE`.
FILE_ENV = run_env.SECRETS_FILE.name
MASK = "***"
#: Set ("1") when no call reaches a service (`dslc test`, `dslc run --replay`): a secret that is
#: not set is then no error, and its `${NAME}` is never filled.
OPTIONAL_ENV = run_env.SECRETS_OPTIONAL.name


def optional() -> bool:
    """True when calls are answered without a service, so secrets may be missing."""
    return run_env.SECRETS_OPTIONAL.is_one()


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether `name` has a value in the secrets file or the environment."""
    environ = os.environ if environ is None else environ
    file = environ.get(FILE_ENV)
    return bool((read_file(file).get(name) if file else None) or environ.get(name))


def names_in(text: str) -> tuple[str, ...]:
    """Secret names of the `${NAME}` references in one text, in order, without repeats."""
    return tuple(dict.fromkeys(SECRET.findall(text))) if "${" in text else ()


def bad_names(text: str) -> list[tuple[int, str]]:
    """(offset, name) of each `${...}` whose name is not an identifier, and of a `${` never closed."""
    found = [(m.start(1), m.group(1)) for m in SECRET.finditer(text) if not NAME.match(m.group(1))]
    closed = {m.start() for m in SECRET.finditer(text)}
    found += [(m.start() + 2, text[m.start() + 2:]) for m in re.finditer(r"\$\{", text) if m.start() not in closed]
    return sorted(found)


def secret_names(value: object) -> tuple[str, ...]:
    """Every secret named in a config object: its strings, tuples and nested dataclasses."""
    found: dict[str, None] = {}

    def visit(item: object) -> None:
        if isinstance(item, str):
            found.update(dict.fromkeys(names_in(item)))
        elif isinstance(item, (tuple, list)):
            for sub in item:
                visit(sub)
        elif dataclasses.is_dataclass(item) and not isinstance(item, (type, Secrets)):
            for field in dataclasses.fields(item):
                if field.name != "secrets":
                    visit(getattr(item, field.name))

    visit(value)
    return tuple(found)


class MissingSecret(Exception):
    """A secret the pipeline names is set nowhere; the message says where it was looked for."""


class Secrets(Mapping[str, str]):
    """Secret values by name. Shown as `***` by repr and str, so a config printed in a log or an
    error never carries a value; pickled whole (that is how the values reach executors)."""

    __slots__ = ("_values", "_forms")

    def __init__(self, values: Mapping[str, str] | None = None) -> None:
        self._values = dict(values or {})
        self._forms: list[tuple[str, str]] | None = None

    def __getitem__(self, name: str) -> str:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return "Secrets(" + ", ".join(f"{name}={MASK}" for name in self._values) + ")"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secrets) and other._values == self._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values)))

    def __getstate__(self) -> dict:
        return {"values": self._values}

    def __setstate__(self, state: dict) -> None:
        self._values = state["values"]
        self._forms = None

    def only(self, names: tuple[str, ...]) -> Secrets:
        """The values of these names (an operator carries only the secrets it uses)."""
        return Secrets({n: self._values[n] for n in names if n in self._values})

    def fill(self, text: str) -> str:
        """`text` with each `${NAME}` replaced by its value (a name without a value stays as written)."""
        if "${" not in text:
            return text
        return SECRET.sub(lambda m: self._values.get(m.group(1), m.group(0)), text)

    def mask(self, text: str) -> str:
        """`text` with every secret value replaced by `${NAME}`: as written and in each encoding a
        service may echo it in (`encodings`), longest first, and a value's start that ends the
        text (a body cut in the middle of it; at least `CUT_SHOWN` characters). Mask before any
        text is shortened: a cut elsewhere than at the end is not recognised."""
        if not self._values or not text:
            return text
        if self._forms is None:
            forms = {(form, name) for name, value in self._values.items() for form in encodings(value)}
            self._forms = sorted(forms, key=lambda pair: (-len(pair[0]), pair))
        for form, name in self._forms:
            if form in text:
                text = text.replace(form, "${" + name + "}")
        return _mask_cut(text, self._forms)


#: How many characters of a value's start at the end of a text are taken for that value, cut.
CUT_SHOWN = 4
#: A base64 form shorter than this is not looked for (it would match unrelated text).
BASE64_SHORTEST = 8


def encodings(value: str) -> list[str]:
    """The forms a value takes in a text that echoes it: as written, percent-encoded (a URL, a
    form), JSON-escaped (also with `/` as `\\/`, as PHP writes it, and with non-ASCII as `\\u`),
    and base64 (standard and URL-safe) at each of the three alignments it can take inside a
    longer encoded text (an HTTP Basic credential, a JWT), only the characters that depend on
    the value alone."""
    escaped = json.dumps(value, ensure_ascii=False)[1:-1]
    forms = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value, safe=""),
             escaped, escaped.replace("/", "\\/"), json.dumps(value)[1:-1]}
    raw = value.encode()
    for shift in range(3):
        # the groups of 3 bytes made of the value's bytes only, when `shift` bytes come before it
        first, last = -(-shift // 3), (shift + len(raw)) // 3
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            encoded = encode(b"\0" * shift + raw).decode("ascii")
            form = encoded[4 * first:4 * last]
            if len(form) >= BASE64_SHORTEST:
                forms.add(form)
    return [form for form in forms if form]


def _mask_cut(text: str, forms: list[tuple[str, str]]) -> str:
    """`text` with a value's start that ends it (trailing spaces, quotes and an ellipsis aside)
    replaced by `${NAME}`: what is left of a secret in a text cut in its middle."""
    body = text.rstrip(" \t\r\n.\u2026\"'")
    tail = text[len(body):]
    for form, name in forms:
        for shown in range(len(form) - 1, min(CUT_SHOWN, len(form)) - 1, -1):
            if body.endswith(form[:shown]):
                return body[:-shown] + "${" + name + "}" + tail
    return text


def read_file(path: str) -> dict[str, str]:
    """`NAME=value` lines; blank lines and lines starting with '#' are skipped, `export ` and one
    pair of surrounding quotes are allowed (a shell's env file reads the same)."""
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("export "):
                line = line[len("export "):].lstrip()
            name, sep, value = line.partition("=")
            name, value = name.strip(), value.strip()
            if not sep or not NAME.match(name):
                # the line may hold a value: say where, never what
                raise MissingSecret(f"{path}:{number}: expected NAME=value")
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[name] = value
    return values


def read(names: tuple[str, ...], environ: Mapping[str, str] | None = None,
         file: str | None = None) -> Secrets:
    """The values of `names`: from the secrets file (`file`, else $DSLC_SECRETS_FILE) first, then
    the environment. A name set in neither raises MissingSecret naming it and both places."""
    environ = os.environ if environ is None else environ
    file = file or environ.get(FILE_ENV) or None
    from_file = read_file(file) if file and names else {}
    values, missing = {}, []
    for name in names:
        value = from_file.get(name, environ.get(name))
        if value is None or value == "":
            missing.append(name)
        else:
            values[name] = value
    if missing:
        where = "the environment of this process" + (f" and the secrets file {file}" if file
                                                     else " (no secrets file: dslc run --secrets FILE)")
        listed = ", ".join(missing)
        raise MissingSecret(f"secret{'s' if len(missing) > 1 else ''} {listed} not set: looked in {where}")
    return Secrets(values)


# ---------------------------------------------------------------- masking every text that leaves

#: A query parameter whose value is a credential, by its name.
CREDENTIAL_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session|cookie", re.IGNORECASE)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")


def mask_url(url: str) -> str:
    """`url` without its user:password part and with the value of every credential-like query
    parameter (api_key, access_token, sig, ...) replaced by `***`; a URL with neither is
    returned as it is (not re-encoded)."""
    import urllib.parse

    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url
    query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
    if "@" not in parts.netloc and not any(CREDENTIAL_NAME.search(k) for k, _ in query):
        return url
    masked = [(k, MASK if CREDENTIAL_NAME.search(k) else v) for k, v in query]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path,
                                    urllib.parse.urlencode(masked, safe="*/{}:$"), parts.fragment))


def masks_nothing(template: str) -> bool:
    """True when no URL filled from this `{column}` template has anything for `mask_url` and
    `scrub`'s URL masking to hide: the template has no user:password and no credential-like query
    name, and no placeholder names a query parameter (a filled value is fully percent-encoded, so
    it cannot add a user, a parameter or a URL of its own). Then a filled URL is its own mask."""
    import urllib.parse

    try:
        query = urllib.parse.urlsplit(template).query
    except ValueError:
        return False
    names = [name for name, _ in urllib.parse.parse_qsl(query, keep_blank_values=True)]
    return scrub(mask_url(template)) == template and not any("{" in name for name in names)


def scrub(text: str, secrets: Secrets | None = None) -> str:
    """The one masking every text that leaves a call goes through (an error's text, a dead
    letter, a recording line, a task failure, a metric's last error): `${NAME}` secret values
    back to their names, and in every URL in it, user:password and credential-like query values
    (an aiohttp TooManyRedirects or ClientConnectorError carries the URL it followed)."""
    if secrets:
        text = secrets.mask(text)
    if "://" in text:
        text = _URL.sub(lambda match: mask_url(match.group(0)), text)
    return text
