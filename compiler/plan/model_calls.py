"""WITH MODEL and WITH EMBEDDING checked: an AT base URL, `{column}` placeholders that are input
columns, RETURNS a JSON schema can express (MODEL) or one vector column (EMBEDDING), and the
options that do not apply to them (BATCH for MODEL)."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dslc.compiler.diagnostics import did_you_mean, error
from dslc.compiler.frontend import ast
from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.service_calls import ServiceChecks
from dslc.runtime.calls.url import placeholders
from dslc.runtime.config import EmbeddingCall, ModelCall
from dslc.runtime.schema.json_schema import unexpressible

if TYPE_CHECKING:
    from dslc.compiler.plan.planner import _Planner as Planner

_VECTOR_TYPES = ("ARRAY<FLOAT>", "ARRAY<DOUBLE>")


def model_call(planner: "Planner", stmt: ast.Enrich, upstream: plan.PlanNode | None,
               returns: tuple[plan.Column, ...], checked) -> tuple[ModelCall | EmbeddingCall | None, tuple[str, ...]]:
    """The checked call of a MODEL or EMBEDDING clause (None when it cannot be built) and its
    key columns (the placeholders: what names an element in errors and dead letters)."""
    call = stmt.call
    kind = "MODEL" if isinstance(call, ast.ModelCall) else "EMBEDDING"
    texts = [t for t in ((call.system, call.prompt) if isinstance(call, ast.ModelCall) else (call.input,)) if t]
    ok = True
    if call.at is None:
        example = "'http://127.0.0.1:8000/v1'"
        planner.add(error("E0310", call.model.span, connector=kind, role="call",
                          what="AT 'base-url' (the OpenAI-compatible API it calls)",
                          hint=f"write WITH {kind} '{call.model.value}' AT {example} ..."))
        ok = False
    elif not re.match(r"^https?://", call.at.value):
        planner.add(error("E0309", call.at.span, text=call.at.value, what=f"{kind} base URL",
                          hint="start it with http:// or https://, e.g. 'https://api.openai.com/v1'"))
        ok = False
    if not call.model.value:
        planner.add(error("E0309", call.model.span, text="", what="model name", hint=f"name the model: {kind} 'gpt-4.1-mini'"))
        ok = False
    service = ServiceChecks(planner.source, planner.problems)     # HEADERS and ${NAME} secrets, as HTTP's
    if call.at is not None:
        ok = service.secrets(call.at) and ok
    headers = service.headers(call.headers)
    ca_file, verify = service.call_options(call.options, kind)
    holes: list[str] = []
    if upstream is not None:
        columns = {f.name.lower(): f.name for f in upstream.schema}
        for text in texts:
            for hole in placeholders(text.value):
                if hole.lower() in columns:
                    holes.append(columns[hole.lower()])
                    continue
                ok = False
                planner.add(error("E0204", _hole_span(planner, text, hole), column=hole,
                                  where=f"a {kind} {'INPUT' if kind == 'EMBEDDING' else 'prompt'} placeholder",
                                  hint=did_you_mean(hole, list(columns.values()))
                                  or f"'{upstream.name}' has columns " + ", ".join(columns.values())))
    if kind == "MODEL":
        ok = _check_model_returns(planner, stmt, returns, checked) and ok
    else:
        ok = _check_embedding_returns(planner, stmt, returns) and ok
    if not ok or upstream is None:
        return None, ()
    # the template's own spelling of a column may differ in case: fill with the input's names
    fixed = [_respell(t.value, {h.lower(): h for h in holes}) for t in texts]
    if isinstance(call, ast.ModelCall):
        system = fixed[0] if call.system else None
        built: ModelCall | EmbeddingCall = ModelCall(call.model.value, call.at.value.rstrip("/"), fixed[-1], system,
                                                     headers=headers, ca_file=ca_file, verify=verify)
    else:
        built = EmbeddingCall(call.model.value, call.at.value.rstrip("/"), fixed[0], headers=headers,
                              ca_file=ca_file, verify=verify)
    key_columns = tuple(dict.fromkeys(holes)) or ((upstream.schema[0].name,) if upstream.schema else ())
    return built, key_columns


def _respell(template: str, names: dict[str, str]) -> str:
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: "{" + names.get(m.group(1).lower(), m.group(1)) + "}",
                  template)


def _hole_span(planner: "Planner", text: ast.Str, hole: str):
    raw = planner.source.text[text.span.start:text.span.end]
    at = raw.find("{" + hole + "}")
    return text.span.sub(at + 1, len(hole)) if at >= 0 else text.span


def _check_model_returns(planner: "Planner", stmt: ast.Enrich, returns, checked) -> bool:
    ok = True
    for col, field in zip(stmt.returns, returns):
        why = unexpressible(field.type)
        if why:
            ok = False
            planner.add(error("E0313", col.type.span, column=field.name, type=field.type, hint=why))
    batch = checked.clauses.get("batch")
    if batch is not None:
        ok = False
        planner.add(error("E0304", batch.span, first="BATCH", second="MODEL (a chat completion answers one prompt)",
                          hint="drop BATCH; CAPACITY sets how many prompts are in flight at once"))
    return ok


def _check_embedding_returns(planner: "Planner", stmt: ast.Enrich, returns) -> bool:
    if len(returns) == 1 and returns[0].type.replace(" ", "").upper() in _VECTOR_TYPES:
        return True
    if len(returns) == 1:
        planner.add(error("E0312", stmt.returns[0].type.span, column=returns[0].name, where="an EMBEDDING's RETURNS",
                          what="ARRAY<FLOAT> or ARRAY<DOUBLE> (the vector)",
                          hint=f"RETURNS ({returns[0].name} ARRAY<FLOAT>)"))
    elif stmt.returns:
        planner.add(error("E0314", stmt.returns[1].span, count=len(returns),
                          hint=f"RETURNS ({returns[0].name if returns else 'embedding'} ARRAY<FLOAT>)"))
    return False


def check_token_rate(planner: "Planner", stmt: ast.Enrich, checked) -> None:
    """TOKENS PER MINUTE limits what answers report as spent: only MODEL and EMBEDDING do."""
    rate = checked.clauses.get("rate")
    if rate is None or len(rate.args) < 3 or isinstance(stmt.call, (ast.ModelCall, ast.EmbeddingCall)):
        return
    kind = "HTTP" if isinstance(stmt.call, ast.HttpCall) else "PYTHON"
    planner.add(error("E0304", rate.args[2].span, first="TOKENS PER MINUTE",
                      second=f"{kind} (only MODEL and EMBEDDING answers report the tokens they spent)",
                      hint=f"keep RATE {rate.args[0].text} PER {rate.args[1].value} alone"))
