"""The `dslc` command line. Every user error is printed as diagnostics with exit status 1;
a traceback only ever means a bug in dslc."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from dslc.compiler.diagnostics import CompileError, ToolError


def _read_error(path: str) -> int:
    print(f"{path}: error: cannot read file", file=sys.stderr)
    return 1


def cmd_check(args: argparse.Namespace) -> int:
    """dslc check FILE [--mode batch|streaming] [--spark]."""
    from dslc.compiler.pipeline import check_source
    from dslc.compiler.source import SourceFile
    source = SourceFile.read(args.file)
    if getattr(args, "secrets", None):      # the DATABASE URLs' secrets (--db, a SOURCE without SCHEMA)
        from dslc.runtime.secrets import FILE_ENV
        os.environ[FILE_ENV] = str(Path(args.secrets).resolve())
    mode = getattr(args, "mode", None)
    if not getattr(args, "spark", False):
        checked = check_source(source, mode=mode)
        _check_databases(args, source, checked)
        _say_remarks(checked, source)
        print(f"{args.file}: ok")
        return 0
    # --spark: Spark's analyzer on every statement that checked, even when others did not, so
    # one run reports all (a misspelt column in one query, a GROUP BY mistake in another)
    from dslc.compiler.interactive.spark_runner import SparkRunner
    from dslc.compiler.pipeline import check_partial
    from dslc.compiler.plan.dry_run import dry_run
    checked, fast = check_partial(source, mode=mode)
    spark = SparkRunner().session({"spark.master": "local[1]", **dict(checked.settings.conf)})
    problems, mismatches = dry_run(checked, source, spark, reported=fast)
    for m in mismatches:
        print(f"{args.file}: note: dslc inferred the columns of '{m.name}' as "
              f"{', '.join(f'{n} {t}' for n, t in m.dslc)}; Spark says {', '.join(f'{n} {t}' for n, t in m.spark)} "
              "(Spark's are what the job gets; please report this to dslc)", file=sys.stderr)
    if fast or problems:
        raise CompileError(source, fast + problems)
    _check_databases(args, source, checked)
    _say_remarks(checked, source)
    print(f"{args.file}: ok")
    return 0


def _check_databases(args: argparse.Namespace, source, checked) -> None:
    """--db: every query, source and sink against the live databases (compiler/plan/database_check.py)."""
    if not getattr(args, "db", False):
        return
    from dslc.compiler.plan.database_check import check
    problems = check(source, checked)
    if problems:
        raise CompileError(source, problems)


def _say_remarks(plan, source) -> None:
    """The plan's notes (things to know that are not errors), on stderr."""
    for remark in plan.remarks:
        print(remark.render(source), file=sys.stderr)


def cmd_explain(args: argparse.Namespace) -> int:
    """dslc explain FILE [--physical] [--format text|json|dot|svg]."""
    from dslc.compiler.pipeline import check_file
    from dslc.compiler.plan.explain import render_json, render_text
    if getattr(args, "estimate", False):
        from dslc.compiler.cli.estimate_command import cmd_estimate
        return cmd_estimate(args)
    plan = check_file(args.file)
    if args.physical or args.format in ("dot", "svg"):
        from dslc.compiler.optimizer.explain import render_physical
        sys.stdout.write(render_physical(plan, args.format))
        return 0
    sys.stdout.write(render_json(plan) if args.format == "json" else render_text(plan))
    return 0


def _commands() -> dict[str, Callable[[argparse.Namespace], int]]:
    from dslc.compiler.cli.commands import EXTRA_COMMANDS  # compile/run/repl: loaded only when a command runs
    from dslc.compiler.cli.replay_command import cmd_replay_dead_letters
    from dslc.compiler.cli.store_command import cmd_store
    return {"check": cmd_check, "explain": cmd_explain, "store": cmd_store,
            "replay-dead-letters": cmd_replay_dead_letters, **EXTRA_COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = argparse.ArgumentParser(prog="dslc", description="Compile .flow pipelines to PySpark jobs.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check a .flow file and report every problem")
    check.add_argument("file")
    check.add_argument("--mode", choices=("batch", "streaming"),
                       help="check the file as run in this mode (default: its PIPELINE's MODE)")
    check.add_argument("--spark", action="store_true",
                       help="also run every query through Spark's analyzer on empty tables (starts a JVM)")
    check.add_argument("--db", action="store_true",
                       help="also check every SQL query, database source and sink against the live DATABASEs")
    check.add_argument("--secrets", metavar="FILE", help="NAME=value lines: the DATABASE URLs' ${NAME} secrets "
                                                         "(else the environment)")
    explain = sub.add_parser("explain", help="print the plan of a .flow file")
    explain.add_argument("file")
    explain.add_argument("--physical", action="store_true", help="show chains and optimiser passes")
    explain.add_argument("--format", choices=("text", "json", "dot", "svg"), default="text")
    explain.add_argument("--estimate", action="store_true",
                         help="per ENRICH: rows, distinct keys, keys in the answer store, calls, tokens, time, budget "
                              "(reads the sources; calls nothing)")
    explain.add_argument("--sample", type=int, default=100_000, metavar="N",
                         help="--estimate: look up at most N distinct keys in the answer store (default 100000)")
    explain.add_argument("--latency", metavar="DURATION", help="--estimate: the service's latency, e.g. 40ms")
    explain.add_argument("--replay", "--record", dest="replay", metavar="DIR",
                         help="--estimate: read the latency (and a model's completion tokens) from a recording folder")
    explain.add_argument("--secrets", metavar="FILE",
                         help="--estimate: NAME=value lines: the ${NAME} secrets of the calls, checked before Spark "
                              "starts (else the environment)")
    compile_ = sub.add_parser("compile", help="write the PySpark job for a .flow file")
    compile_.add_argument("file")
    compile_.add_argument("-o", "--output", help="job file (default: stdout)")
    compile_.add_argument("--mode", choices=("batch", "streaming"))
    compile_.add_argument("--no-chaining", action="store_true", help="one mapInArrow per Python operator")
    compile_.add_argument("--no-pushdown", action="store_true", help="keep filters where they are written")
    run = sub.add_parser("run", help="compile and run with spark-submit",
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("file")
    run.add_argument("--mode", choices=("batch", "streaming"))
    run.add_argument("--trigger", help="available-now or every=10s")
    run.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    run.add_argument("--remote", metavar="sc://HOST:PORT", default=None,
                     help="run through a Spark Connect server instead of spark-submit")
    run.add_argument("--record", metavar="DIR", help="write every ENRICH call and its answer under DIR")
    run.add_argument("--replay", metavar="DIR", help="answer ENRICH calls from DIR (no network)")
    run.add_argument("--replay-unrecorded", choices=("error", "miss"), default="error",
                     help="a call DIR does not hold: an error naming operator and key (default), or a miss")
    run.add_argument("--secrets", metavar="FILE",
                     help="NAME=value lines: the ${NAME} secrets of the calls (else the environment)")
    run.add_argument("--replay-latency", action="store_true", help="wait as long as each recorded call took")
    run.add_argument("--report", metavar="FILE.html", help="write the run's report: one self-contained HTML page")
    run.add_argument("--summary-json", metavar="FILE",
                     help="write the run's outcome as JSON (rows read and written, dead letters, answers, "
                          "exit code), for schedulers")
    run.add_argument("--jars", metavar="PATH", default=None,
                     help="PostgreSQL's JDBC driver jar (DATABASE sources and sinks); default $DSLC_JDBC_JAR, "
                          "else /usr/share/java/postgresql.jar")
    run.epilog = "arguments after '--' go to spark-submit unchanged: dslc run FILE --master URL -- --conf k=v"
    report = sub.add_parser("report", help="write the HTML report of a run's metrics file")
    report.add_argument("file", metavar="METRICS.json")
    report.add_argument("-o", "--output", required=True, metavar="FILE.html")
    test = sub.add_parser("test", help="run the cases of *.test.yaml files on local Spark")
    test.add_argument("paths", nargs="*", metavar="PATH", help="test files or folders (default: .)")
    test.add_argument("--keep", action="store_true", help="keep each case's folder (job, inputs, outputs)")
    test.add_argument("-v", "--verbose", action="store_true",
                      help="each case's live progress, metrics table and diagnosis too (default: one line per case)")
    from dslc.compiler.cli.store_command import add_parser as add_store_parser
    add_store_parser(sub)
    from dslc.compiler.cli.replay_command import add_parser as add_replay_parser
    add_replay_parser(sub)
    repl = sub.add_parser("repl", help="explore a pipeline interactively")
    repl.add_argument("file", nargs="?")
    repl.add_argument("--no-spark", action="store_true",
                      help="check statements with the fast check only (default: also Spark's analyzer, "
                           "on a JVM started in the background)")
    lsp = sub.add_parser("lsp", help="language server for editors (LSP over stdin/stdout)")
    lsp.add_argument("--stdio", action="store_true", help="accepted for clients that pass it; stdio is the only transport")
    lsp.add_argument("--spark", action="store_true",
                     help="after the fast diagnostics, also Spark's analyzer's (and its types on hover), from a JVM "
                          "started in the background (same as the initialization option spark: true)")
    lsp.add_argument("--db", action="store_true",
                     help="also check SQL queries, database sources and sinks against the live DATABASEs, as dslc "
                          "check --db does (same as the initialization option db: true)")
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The parsed command line. Everything after the first `--` is spark-submit's (`dslc run`
    only), so dslc's own options may come anywhere before it, after FILE too."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    args.spark_args = argv[cut + 1:]
    if cut < len(argv) and args.command not in ("run", "replay-dead-letters"):
        parser.error("'--' passes arguments to spark-submit; only 'dslc run' takes them")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `dslc` script."""
    args = parse_args(argv)
    command = _commands()[args.command]
    file = getattr(args, "file", None)
    if file is not None and not Path(file).is_file():
        return _read_error(file)
    try:
        return command(args)
    except CompileError as exc:
        print(exc.render(), file=sys.stderr)
        # a run's exit codes: runtime/exit_codes.py
        return 2 if args.command in ("run", "replay-dead-letters") else 1
    except ToolError as exc:
        print(f"dslc: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
