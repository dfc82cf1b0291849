"""runtime/secrets.py: `${NAME}` found in any call config, values read from a NAME=value file or
the environment, a missing one named with where it was looked for, values masked in any text."""
from __future__ import annotations

import base64
import json
import pickle
import urllib.parse

import pytest

from dslc.runtime import config as C
from dslc.runtime import secrets as S
from dslc.runtime.calls.url import fill_url, placeholders


def test_a_secret_is_not_a_column_placeholder():
    url = "https://api.example.com/k/${API_KEY}/customers/{customer_id}?t=${TOKEN}"
    assert placeholders(url) == ("customer_id",)
    assert fill_url(url, {"customer_id": "c 1"}) == "https://api.example.com/k/${API_KEY}/customers/c%201?t=${TOKEN}"
    assert S.names_in(url) == ("API_KEY", "TOKEN")


def test_names_are_found_in_any_call_config():
    call = C.HttpCall(url="https://x/${A}/{id}", headers=(("Authorization", "Bearer ${B}"), ("X-Other", "${A}")))
    enrich = C.Enrich(name="e", line=3, call=call, returns=(C.Column("v", "STRING"),), key_columns=("id",))
    assert enrich.secret_names == ("A", "B")
    assert C.Enrich(name="e", line=3, call=C.PythonCall("m:f"), returns=(), key_columns=()).secret_names == ()


@pytest.mark.parametrize("text, bad", [
    ("${ok_1}", []), ("${1x}", [(2, "1x")]), ("${a-b} ${c}", [(2, "a-b")]), ("x ${open", [(4, "open")]),
    ("${}", [(2, "")]),
])
def test_bad_names(text, bad):
    assert S.bad_names(text) == bad


def test_read_from_a_file_first_then_the_environment(tmp_path):
    file = tmp_path / "s.env"
    file.write_text("# comment\n\nexport A='from file'\nB=\"quoted\"\nC = spaced \n")
    found = S.read(("A", "B", "C", "D"), environ={"A": "from env", "D": "env only"}, file=str(file))
    assert dict(found) == {"A": "from file", "B": "quoted", "C": "spaced", "D": "env only"}


def test_a_missing_secret_names_itself_and_where_it_was_looked_for(tmp_path):
    with pytest.raises(S.MissingSecret) as missing:
        S.read(("TOKEN", "KEY"), environ={"KEY": "k"})
    assert str(missing.value) == ("secret TOKEN not set: looked in the environment of this process "
                                  "(no secrets file: dslc run --secrets FILE)")
    file = tmp_path / "s.env"
    file.write_text("OTHER=1\n")
    with pytest.raises(S.MissingSecret, match=f"secrets TOKEN, KEY not set: looked in the environment of this "
                                              f"process and the secrets file {file}"):
        S.read(("TOKEN", "KEY"), environ={S.FILE_ENV: str(file)})


def test_a_bad_line_is_reported_without_its_content(tmp_path):
    file = tmp_path / "s.env"
    file.write_text("GOOD=1\nthis line holds hunter2\n")
    with pytest.raises(S.MissingSecret) as bad:
        S.read(("GOOD",), environ={}, file=str(file))
    assert str(bad.value) == f"{file}:2: expected NAME=value" and "hunter2" not in str(bad.value)


def test_values_are_masked_and_never_printed():
    secrets = S.Secrets({"TOKEN": "t0p-s3cret", "SHORT": "s3cret"})
    assert repr(secrets) == str(secrets) == "Secrets(TOKEN=***, SHORT=***)"
    assert secrets.mask("HTTP 401: bad token t0p-s3cret (s3cret)") == "HTTP 401: bad token ${TOKEN} (${SHORT})"
    assert secrets.fill("Bearer ${TOKEN} ${OTHER}") == "Bearer t0p-s3cret ${OTHER}"
    assert S.Secrets({"K": "a/b c"}).mask("GET https://x/?k=a%2Fb%20c failed") == "GET https://x/?k=${K} failed"
    assert "t0p" not in repr(C.Enrich(name="e", line=1, call=C.HttpCall(url="http://x/"), returns=(),
                                      key_columns=(), secrets=secrets))
    assert pickle.loads(pickle.dumps(secrets)) == secrets      # how the values reach executors


TOKEN = "Tk-4f81/c0de93a7+never-written"


@pytest.mark.parametrize("echoed", [
    json.dumps({"error": f"bad token {TOKEN}"}).replace("/", "\\/"),          # PHP's json_encode
    json.dumps({"error": f"bad token {TOKEN}"}),
    f"bad token {urllib.parse.quote(TOKEN, safe='')}",
    f"bad token {urllib.parse.quote_plus(TOKEN)}",
    "Basic " + base64.b64encode(f"user:{TOKEN}".encode()).decode(),
    "Basic " + base64.b64encode(f"us:{TOKEN}".encode()).decode(),
    "Basic " + base64.urlsafe_b64encode(f"u:{TOKEN}".encode()).decode(),
    f"bad token {TOKEN[:9]}",                # a body cut in the middle of the value
    f"bad token {TOKEN[:5]}...",
])
def test_every_encoding_of_a_secret_and_a_cut_one_is_masked(echoed):
    masked = S.Secrets({"TOKEN": TOKEN}).mask(echoed)
    assert "${TOKEN}" in masked
    for form in _leaks(TOKEN):
        assert form not in masked, (form, masked)


def _leaks(value: str) -> list[str]:
    """Pieces of the value a reader could take it from: its halves, raw and base64-decoded."""
    half = len(value) // 2
    return [value[:half], value[half:], urllib.parse.quote(value[:half], safe=""),
            base64.b64encode(value[3:].encode()).decode()[4:16]]


def test_masking_leaves_other_text_alone():
    secrets = S.Secrets({"TOKEN": TOKEN})
    for text in ("HTTP 401: unauthorized", "Tk-4 is a tank", "", "aGVsbG8gd29ybGQ="):
        assert secrets.mask(text) == text
