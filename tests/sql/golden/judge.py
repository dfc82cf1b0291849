"""dslc's fast check against Spark's verdicts on Spark's own golden SQL tests (see convert.py).

Three figures say how far the checker agrees with Spark:
- false rejections: queries Spark accepts that `dslc check` rejects;
- schema equal: of the queries both accept, the share whose output names and types are Spark's;
- refused caught: of the queries Spark refuses, how many the fast check refuses too.

    python tests/sql/golden/judge.py [corpus.jsonl] [--show rejected|mismatched|accepted] [--limit N]

prints the figures and, with --show, the queries behind one of them (what to fix next).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
CORPUS = HERE / "corpus.jsonl"
_QUALIFIED = re.compile(r"\b(FROM|JOIN|TABLE)\s+[A-Za-z_]\w*\.[A-Za-z_]\w*", re.I)


@dataclass
class Verdict:
    record: dict
    accepted: bool
    ours: list[tuple[str, str]] | None = None
    theirs: list[tuple[str, str]] | None = None
    codes: tuple[str, ...] = ()
    message: str = ""


@dataclass
class Figures:
    queries: int = 0
    no_source: int = 0
    valid: int = 0
    false_rejections: int = 0
    accepted_valid: int = 0
    schema_equal: int = 0
    refused: int = 0
    refused_caught: int = 0
    by_kind: dict[str, list[Verdict]] = field(default_factory=dict)

    @property
    def equal_share(self) -> float:
        return self.schema_equal / self.accepted_valid if self.accepted_valid else 0.0

    def summary(self) -> str:
        return (f"{self.queries} queries ({self.valid} valid on Spark, {self.refused} refused by Spark; "
                f"{self.no_source} read no view, judged as a query alone)\n"
                f"false rejections: {self.false_rejections} of {self.valid} valid queries\n"
                f"schema equal: {self.schema_equal} of {self.accepted_valid} accepted valid queries "
                f"({self.equal_share:.1%})\n"
                f"refused by Spark: {self.refused_caught} of {self.refused} also refused by the fast check, "
                f"{self.refused - self.refused_caught} accepted")


def load(path: Path = CORPUS) -> tuple[dict, list[dict]]:
    """(header, records) of a converted corpus, without the queries a flow cannot express: those
    that name a relation by its database (`mydb.t`, `global_temp.v`; a SOURCE has one name)."""
    with open(path, encoding="utf-8") as f:
        header = json.loads(f.readline())
        records = [json.loads(line) for line in f]
    return header, [r for r in records if not _QUALIFIED.search(r["sql"])]


def spark_schema(record: dict) -> list[tuple[str, str]] | None:
    """Spark's (name, type) columns in dslc's canonical type spelling, None when it refused."""
    from dslc.compiler.sparksql.sqltypes import canonical

    if "schema" not in record["spark"]:
        return None
    return [(name, canonical(t) or t.upper()) for name, t in record["spark"]["schema"]]


def verdict(record: dict) -> Verdict:
    """The fast check's verdict on one flow."""
    from dslc.compiler.diagnostics import CompileError
    from dslc.compiler.pipeline import check_text

    theirs = spark_schema(record)
    if not record["flow"].startswith("SOURCE "):
        return _query_verdict(record, theirs)
    flow = record["flow"]
    if "\n;\n" not in flow:          # corpora made before convert.py put the ';' on a line of its own
        flow = flow.replace(record["sql"].rstrip().rstrip(";") + ";\n", record["sql"].rstrip().rstrip(";") + "\n;\n")
    try:
        checked = check_text(flow, "golden.flow")
    except CompileError as exc:
        first = exc.diagnostics[0]
        if all("must read a source" in d.message for d in exc.diagnostics):
            return _query_verdict(record, theirs)      # the views it names are CTEs of its own
        return Verdict(record, False, theirs=theirs, codes=tuple(d.code for d in exc.diagnostics),
                       message=f"{first.code} {first.message}")
    ours = [(f.name, f.type) for f in checked.node("q").schema]
    return Verdict(record, True, ours=ours, theirs=theirs)


def _query_verdict(record: dict, theirs) -> Verdict:
    """A query that reads no view (`SELECT 1 + 2`): a STREAM must read a source, so it is judged
    by the fast check's query analysis alone, the rule that it must read one left out."""
    from dslc.compiler.frontend import ast
    from dslc.compiler.source import Span
    from dslc.compiler.sparksql.sql import analyze_query, parse_sql

    sql = ast.Sql(record["sql"], Span(0, len(record["sql"])))
    problems: list = []
    tree = parse_sql(sql, problems)
    info = analyze_query(sql, tree, {}, problems, must_read=False) if tree is not None else None
    if problems or info is None or info.schema is None:
        first = problems[0] if problems else None
        return Verdict(record, False, theirs=theirs, codes=tuple(d.code for d in problems) or ("?",),
                       message=f"{first.code} {first.message}" if first else "no schema")
    return Verdict(record, True, ours=[(f.name, f.type) for f in info.schema], theirs=theirs)


def judge(records: list[dict]) -> Figures:
    figures = Figures()
    kinds: dict[str, list[Verdict]] = {"rejected": [], "mismatched": [], "accepted": []}
    for record in records:
        figures.no_source += not record["flow"].startswith("SOURCE ")
        v = verdict(record)
        figures.queries += 1
        if v.theirs is not None:
            figures.valid += 1
            if not v.accepted:
                figures.false_rejections += 1
                kinds["rejected"].append(v)
            else:
                figures.accepted_valid += 1
                if v.ours == v.theirs:
                    figures.schema_equal += 1
                else:
                    kinds["mismatched"].append(v)
        else:
            figures.refused += 1
            if v.accepted:
                kinds["accepted"].append(v)
            else:
                figures.refused_caught += 1
    figures.by_kind = kinds
    return figures


def _show(v: Verdict) -> str:
    r = v.record
    text = f"--- {r['file']}#{r['index']}: {r['sql'][:400]}\n"
    if v.message:
        text += f"    dslc: {v.message[:300]}\n"
    if v.ours is not None and v.theirs is not None:
        diff = [(o, t) for o, t in zip(v.ours, v.theirs) if o != t] or [(v.ours, v.theirs)]
        text += "".join(f"    dslc {o}\n   spark {t}\n" for o, t in diff[:3])
    if v.theirs is None:
        text += f"    spark: {r['spark']['error']}\n"
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", nargs="?", default=str(CORPUS))
    parser.add_argument("--show", choices=("rejected", "mismatched", "accepted"))
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument("--only", help="files whose path contains this")
    args = parser.parse_args(argv)
    header, records = load(Path(args.corpus))
    if args.only:
        records = [r for r in records if args.only in r["file"]]
    figures = judge(records)
    print(f"Spark commit {header['spark_commit']}, judged by PySpark {header['pyspark']}")
    print(figures.summary())
    if args.show:
        shown = figures.by_kind[args.show]
        if args.show == "rejected":
            print(Counter(v.codes[0] for v in shown).most_common())
        for v in shown[: args.limit]:
            sys.stdout.write(_show(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
