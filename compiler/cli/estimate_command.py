"""`dslc explain FILE --estimate [--sample N] [--latency 40ms | --replay DIR | --record DIR] [--secrets FILE]`:
the bill before the run. The job runs on local Spark with nothing called (runtime/spark/estimate.py
says how each figure is counted)."""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import runpy
import statistics
import sys
import tempfile
from pathlib import Path

from dslc.compiler.diagnostics import ToolError
from dslc.runtime import run_env
from dslc.runtime.metrics import money

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_latency(text: str) -> float:
    """'40ms' -> 0.04 seconds."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text.strip())
    if not match:
        raise ToolError(f"--latency: expected a duration such as 40ms or 1.5s, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def recorded_latency(directory: str) -> dict[str, float]:
    """Median latency in seconds per operator of a recording folder."""
    from dslc.runtime.wrappers.recording import entries

    folder = Path(directory)
    if not folder.is_dir():
        raise ToolError(f"no recording folder {directory}")
    by_operator: dict[str, list[float]] = {}
    for call in entries(folder):
        if call.get("latency_ms") is not None:
            by_operator.setdefault(call["operator"], []).append(float(call["latency_ms"]) / 1000)
    return {op: statistics.median(values) for op, values in by_operator.items()}


def recorded_completion(directory: str) -> dict[str, float]:
    """Mean completion tokens per operator of a recording folder: the tokens of each recorded
    answer's JSON text (a structured output's content is that JSON), its provenance note left out."""
    from dslc.runtime.limits.tokens import text_tokens
    from dslc.runtime.schema.provenance import answered
    from dslc.runtime.wrappers.recording import entries

    by_operator: dict[str, list[int]] = {}
    for call in entries(Path(directory)):
        if "answer" in call:
            by_operator.setdefault(call["operator"], []).append(text_tokens(json.dumps(answered(call["answer"]))))
    return {op: statistics.mean(values) for op, values in by_operator.items()}


def as_batch(plan):
    """A checked plan as the BATCH job that reads its sources as they are now: the estimate's
    job. A STREAMING file's MODE COMPLETE sinks become MODE OVERWRITE (nothing is written)."""
    import dataclasses

    sinks = tuple(dataclasses.replace(s, mode="OVERWRITE") if s.mode == "COMPLETE" else s for s in plan.sinks)
    return dataclasses.replace(plan, settings=dataclasses.replace(plan.settings, mode="BATCH"), sinks=sinks)


class SecretsMissing(ToolError):
    """A `${NAME}` secret of the calls is set nowhere (or --secrets names no file)."""


def check_secrets(plan, secrets_file: str | None) -> None:
    """Every `${NAME}` secret of the calls is set (in `secrets_file` or the environment) before
    Spark starts, as `dslc run` checks them; a ToolError naming the missing ones otherwise."""
    from dslc.compiler.codegen.lower import pipeline_secrets
    from dslc.runtime import secrets

    if secrets_file and not os.path.isfile(secrets_file):
        raise SecretsMissing(f"--secrets: no file {secrets_file}")
    try:
        secrets.read(pipeline_secrets(plan), file=secrets_file)
    except secrets.MissingSecret as exc:
        raise SecretsMissing(str(exc).replace("dslc run --secrets FILE", "--secrets FILE")) from None


def estimates(flow: str, *, sample: int = 100_000, latency: str | None = None, recording: str | None = None,
              secrets_file: str | None = None):
    """Run the job of `flow` without calling anything; an Estimate per ENRICH. The file is
    checked in its own MODE; its secrets are checked before Spark starts."""
    from dslc.compiler.pipeline import check_source, lower_plan
    from dslc.compiler.source import SourceFile
    from dslc.runtime import secrets
    from dslc.runtime.spark import estimate, failure

    plan = as_batch(check_source(SourceFile.read(flow)))
    check_secrets(plan, secrets_file)
    given = parse_latency(latency) if latency else None
    recorded = recorded_latency(recording) if recording else {}
    completions = recorded_completion(recording) if recording else {}
    with tempfile.TemporaryDirectory(prefix="dslc-estimate-") as folder:
        job = Path(folder) / "estimate_job.py"
        job.write_text(lower_plan(plan, job_folder=folder, writes=False, estimate=True))
        saved = {key: os.environ.get(key) for key in (run_env.FLOW_FOLDER.name, secrets.FILE_ENV)}
        os.environ[run_env.FLOW_FOLDER.name] = str(Path(flow).resolve().parent)
        if secrets_file:
            os.environ[secrets.FILE_ENV] = str(Path(secrets_file).resolve())
        try:
            _quiet_session(plan.settings.conf)
            job_main, found = runpy.run_path(str(job), run_name="dslc_estimate_job")["main"], []
            # run as the job runs itself (failure.run_main: its stops, outcome and clean-up); its
            # main() hands back the rows reaching each ENRICH
            failure.run_main(lambda: found.extend(job_main().chain_inputs))
            from pyspark.sql import SparkSession
            spark = SparkSession.getActiveSession()
            tasks = spark.sparkContext.defaultParallelism if spark is not None else 1
            return [estimate.estimate_one(op, df, sample=sample, tasks=tasks,
                                          latency_s=given if given is not None else recorded.get(op.name),
                                          completion=completions.get(op.name))
                    for op, df in found]
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _quiet_session(conf) -> None:
    """The local session the job will reuse, without progress bars over the table."""
    from pyspark.sql import SparkSession

    # the Python workers that look keys up and count prompt tokens import dslc: this interpreter's
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(run_env.MASTER.get()).appName("dslc-estimate")
    for key, value in (("spark.ui.showConsoleProgress", "false"), ("spark.ui.enabled", "false"),
                       ("spark.log.level", "ERROR"), *conf):
        builder = builder.config(key, value)
    builder.getOrCreate()


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.1f}s"
    if value < 7200:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def _number(value: float) -> str:
    return str(value) if isinstance(value, int) or not float(value).is_integer() else str(int(value))


def _budget(e) -> str:
    if e.budget is None:
        return "-"
    if e.budget_enough is None:
        return f"{_number(e.budget)} {e.budget_unit}"
    if e.budget_enough:
        return f"{_number(e.budget)}: enough"
    short = e.budget_spent - e.budget
    return f"{_number(e.budget)}: short by " + (money(short) if e.budget_unit == "USD" else _number(short))


def _money_notes(e) -> list[str]:
    """What the ENRICH's calls cost at each tier, beside its own."""
    if e.tiers_usd is None:
        return []
    others = ", ".join(f"{tier} {money(usd)}" for tier, usd in e.tiers_usd.items() if tier != e.tier)
    return [f"{e.operator}: money at TIER {e.tier} {money(e.money_usd)}; the other tiers: {others} "
            "(FLEX and BATCH at half of STANDARD; a batch's lines sent online cost STANDARD)"]


def render(flow: str, found) -> str:
    """The estimate as a table, one row per ENRICH, then notes."""
    priced = any(e.money_usd is not None for e in found)
    head = ("operator", "line", "rows", "distinct_keys", "in_store", "calls", "tokens", "time", "budget") + \
        (("money",) if priced else ())
    rows = []
    notes = []
    for e in found:
        in_store = "-" if e.stored_keys is None else f"{'~' if e.sampled else ''}{e.stored_keys}"
        tokens = "-" if e.tokens is None else f"{'~' if e.sampled else ''}{e.tokens}"
        cells = (e.operator, str(e.line), str(e.rows), str(e.distinct_keys), in_store, str(e.calls),
                 tokens, _seconds(e.seconds), _budget(e))
        if priced:
            cells += ("-" if e.money_usd is None else f"{'~' if e.sampled else ''}{money(e.money_usd)}",)
        rows.append(cells)
        notes.extend(_money_notes(e))
        if e.seconds is None and e.tier == "BATCH":
            pass                          # the provider's time: its note says so
        elif e.seconds is None:
            notes.append(f"{e.operator}: no time without a latency (--latency 40ms, or --replay/--record DIR)")
        else:
            how = f"latency {e.latency_s * 1000:.0f} ms, " if e.latency_s is not None else ""
            notes.append(f"{e.operator}: time at {how}CAPACITY {e.capacity} x {e.tasks} tasks"
                         + (f", RATE {e.rate:g}/s" if e.rate else ""))
        if e.budget_enough is False:
            runs = math.ceil(e.budget_spent / e.budget)
            notes.append(f"{e.operator}: BUDGET {e.budget} {e.budget_unit} stops the run; {runs} runs complete it "
                         "(each continues from the answer store)")
        notes.extend(f"{e.operator}: {n}" for n in e.notes)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = [f"estimate for {flow}: nothing was called (sources read, filters applied)",
             "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths)))]
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    if not rows:
        lines.append("(no ENRICH)")
    lines += [f"  {n}" for n in notes]
    return "\n".join(lines) + "\n"


def cmd_estimate(args: argparse.Namespace) -> int:
    """dslc explain FILE --estimate ..."""
    recording = getattr(args, "replay", None) or getattr(args, "record", None)
    try:
        found = estimates(args.file, sample=args.sample, latency=args.latency, recording=recording,
                          secrets_file=getattr(args, "secrets", None))
    except SecretsMissing as exc:      # exit 2 as `dslc run`'s: the configuration is wrong
        print(f"dslc: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        sys.stdout.write(json.dumps([e.to_dict() for e in found], indent=2) + "\n")
    else:
        sys.stdout.write(render(args.file, found))
    return 0
