"""Write compiler/sparksql/spark_calls.py: how Spark prints and counts the arguments of its built-in
functions, read from Spark's own function registry.

    python -m tools.make_spark_calls          (from the repository's root)

For every function `SHOW FUNCTIONS` lists:
- the argument counts Spark accepts: the function is called with 0 to 8 NULLs and every count
  Spark's analyzer does not refuse with WRONG_NUM_ARGS is kept (nothing is executed);
- the aggregate functions (the registry's group `agg_funcs`, grouping() and grouping_id() aside:
  they name grouping columns, they aggregate nothing), for the GROUP BY rules (aggregation.py);
- the name Spark prints for a call (`SINH(1)` for `sinh(1)`) and the arguments it adds to the
  name when they are left out (`mask(x)` is named `mask(x, X, x, n, NULL)`): each example of
  `DESCRIBE FUNCTION EXTENDED` is named by Spark and by dslc's SparkNamer, and where the two differ
  only by the function name's case or by arguments appended at the end, the difference is kept.

The fast check uses the tables for names (spark_names.py), for argument counts (arity.py, with
MAX_PROBED, the highest count probed, written into the table) and for aggregation (aggregation.py).
Run it again after a Spark upgrade.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from tools.make_spark_returns import examples, quiet_spark

TARGET = Path(__file__).resolve().parents[1] / "compiler" / "sparksql" / "spark_calls.py"
MAX_PROBED = 8
_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\(")


def arities(spark, name: str) -> tuple[int, ...] | None:
    """The argument counts Spark accepts, None when a probe fails for another reason everywhere
    (a function Spark parses as syntax, or one that needs a lambda). A count refused with NULLs
    is tried again with a unit keyword first (`dateadd(DAY, n, ts)` is Spark's timestampadd)."""
    accepted = []
    for count in range(MAX_PROBED + 1):
        verdict = _probe(spark, name, ["NULL"] * count)
        if verdict == "syntax":
            return None
        if verdict == "wrong" and count:
            verdict = _probe(spark, name, ["DAY"] + ["NULL"] * (count - 1))
        if verdict == "ok":
            accepted.append(count)
    return tuple(accepted)


def _probe(spark, name: str, args: list[str]) -> str:
    """ok, wrong (WRONG_NUM_ARGS) or syntax (Spark does not read it as a call)."""
    keyword = bool(args) and args[0] == "DAY"
    try:
        called = name if keyword else f"`{name}`"     # a keyword form needs the bare name
        _ = spark.sql(f"SELECT {called}({', '.join(args)})").schema   # analysed when read
    except Exception as exc:    # noqa: BLE001 - the condition tells whether the count was refused
        text = str(exc)
        if keyword:             # the keyword form counts only when Spark read it as one
            return "ok" if "DATATYPE_MISMATCH" in text else "wrong"
        if "WRONG_NUM_ARGS" in text or "INVALID_NUMBER_OF_ARGUMENTS" in text or "UNRESOLVED_COLUMN" in text:
            return "wrong"
        if "UNRESOLVED_ROUTINE" in text or "PARSE_SYNTAX_ERROR" in text:
            return "syntax" if args and args[0] == "NULL" or not args else "wrong"
    return "ok"


def spark_name(spark, sql: str) -> str | None:
    try:
        fields = spark.sql(sql).schema.fields
    except Exception:       # noqa: BLE001 - an example that needs a table, or fails by design
        return None
    return fields[0].name if len(fields) == 1 else None


def our_name(sql: str) -> tuple[str, int] | None:
    """dslc's name for the example's one select item and the number of arguments of its outer call."""
    from sqlglot import exp

    from dslc.compiler.sparksql.spark_dialect import SPARK_SQL
    from dslc.compiler.sparksql.spark_names import SparkNamer

    try:
        tree = SPARK_SQL.parser().parse(SPARK_SQL.tokenize(sql), sql)[0]
    except Exception:       # noqa: BLE001 - an example sqlglot cannot read
        return None
    if not isinstance(tree, exp.Select) or len(tree.selects) != 1 or isinstance(tree.selects[0], exp.Alias):
        return None
    item = tree.selects[0]
    try:
        name = SparkNamer(sql, tree).name(item)
    except Exception:       # noqa: BLE001 - an example the namer cannot print
        return None
    written = SparkNamer(sql, tree)._written_arguments(item) if isinstance(item, exp.Func) else None
    return name, len([a for a in written if a.strip()]) if written is not None else -1


def printing(spark, name: str) -> tuple[str | None, dict[int, str]]:
    """(the name Spark prints when it is not the called one, {arguments written: defaults appended})."""
    printed, defaults = None, {}
    for sql in examples(spark, name):
        theirs = spark_name(spark, sql)
        ours = our_name(sql)
        if theirs is None or ours is None or theirs == ours[0]:
            continue
        text, count = ours
        mine, their_call = _CALL.match(text), _CALL.match(theirs)
        if mine is None or their_call is None or mine[1].lower() != name or their_call[1].lower() != name:
            continue
        if their_call[1] != mine[1]:
            printed = their_call[1]
            text = their_call[1] + text[len(mine[1]):]
        if text == theirs or count < 0:
            continue
        if theirs.startswith(text[:-1] + ", ") and theirs.endswith(")") and text.endswith(")"):
            defaults.setdefault(count, theirs[len(text) - 1 + 2:-1])
    return printed, defaults


def aggregates(spark, names: list[str]) -> list[str]:
    """The functions Spark's registry files under aggregate functions."""
    identifier = spark._jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    catalog = spark._jsparkSession.sessionState().catalog()
    return [name for name in names if name not in ("grouping", "grouping_id")
            and catalog.lookupFunctionInfo(identifier.apply(name)).getGroup() == "agg_funcs"]


def function_names(spark) -> list[str]:
    return sorted(r[0] for r in spark.sql("SHOW FUNCTIONS").collect() if re.fullmatch(r"[a-z_][a-z0-9_]*", r[0]))


def tables(spark) -> tuple[dict[str, tuple[int, ...]], dict[str, str], dict[tuple[str, int], str]]:
    from dslc.compiler.sparksql import spark_names

    spark_names.PRINTED_NAMES, spark_names.DEFAULT_ARGUMENTS = {}, {}    # dslc's names without these tables
    names = function_names(spark)
    counts, printed, defaults = {}, {}, {}
    for name in names:
        accepted = arities(spark, name)
        if accepted:
            counts[name] = accepted
        shown, added = printing(spark, name)
        if shown is not None:
            printed[name] = shown
        for count, text in added.items():
            defaults[(name, count)] = text
    return counts, printed, defaults


def main() -> int:
    import pyspark
    spark = quiet_spark("spark-calls")
    counts, printed, defaults = tables(spark)
    lines = [f'"""Generated by tools/make_spark_calls.py from PySpark {pyspark.__version__}\'s function registry: do',
             'not edit by hand. How Spark counts and prints the arguments of its built-in functions (see',
             'tools/make_spark_calls.py for how each table is read)."""', "",
             "# the highest argument count probed: a function that accepts it may accept more",
             f"MAX_PROBED = {MAX_PROBED}", "",
             f"# name -> the argument counts Spark accepts ({MAX_PROBED} means {MAX_PROBED} or more)",
             "ARITIES = {"]
    lines += [f"    {name!r}: {accepted!r}," for name, accepted in sorted(counts.items())]
    lines += ["}", "", "# name -> the name Spark prints for a call", "PRINTED_NAMES = {"]
    lines += [f"    {name!r}: {shown!r}," for name, shown in sorted(printed.items())]
    lines += ["}", "", "# (name, arguments written) -> the arguments Spark adds to the printed name", "DEFAULT_ARGUMENTS = {"]
    lines += [f"    {key!r}: {text!r}," for key, text in sorted(defaults.items())]
    lines += ["}", "", "# the aggregate functions (grouping() and grouping_id() aside)", "AGGREGATES = frozenset({"]
    lines += [f"    {name!r}," for name in aggregates(spark, function_names(spark))]
    lines += ["})", ""]
    TARGET.write_text("\n".join(lines), encoding="utf-8")
    print(f"{TARGET}: {len(counts)} arities, {len(printed)} printed names, {len(defaults)} defaults", file=sys.stderr)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
