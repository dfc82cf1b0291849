"""`dslc replay-dead-letters FILE --operator NAME [--to DIR]`: the rows an ENRICH dead-lettered,
fed through the same ENRICH again (docs/operations.md, "Dead letters").

A dead letter holds the ENRICH's whole input row (`row`), so once the cause is fixed (the
service, a secret, RETURNS) the rows can be answered again without running the pipeline from
its sources. The command writes a pipeline of three statements beside FILE, so that its paths,
its Python modules and its answer store are the pipeline's own:

    SOURCE letters FROM JSON '<the dead letters>' SCHEMA (operator STRING, `row` STRUCT<...>);
    STREAM rows = SELECT `row`.a AS a, ... FROM letters WHERE operator = 'NAME';
    <the ENRICH statement as written, reading rows; its dead letters to DIR/dead_letters>
    SINK NAME TO PARQUET 'DIR/rows' MODE OVERWRITE;

and runs it with `dslc run` in BATCH mode (its options: --secrets, --master, ...). The answered
rows land in DIR/rows (default target/replayed/NAME) for the user to merge where they belong; the
rows that fail again are dead letters in DIR/dead_letters. The original dead letters are left as
they are.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

from dslc.compiler.diagnostics import ToolError

_ENRICH_INPUT = re.compile(r"(\bENRICH\s+)(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_DEAD_LETTER = re.compile(r"""(\bDEAD\s+LETTER\s+)('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(\s*'[^']*'|\s*"[^"]*")*""",
                          re.IGNORECASE)


def _quoted(text: str) -> str:
    """A Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _name(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


def replay_flow(flow: Path, operator: str, letters: str | None, to: str) -> tuple[str, Path]:
    """The replay pipeline's text and the dead letters it reads (see the module's docstring)."""
    from dslc.compiler.pipeline import check_file
    from dslc.compiler.plan import logical as plan
    from dslc.compiler.source import SourceFile

    checked = check_file(str(flow))
    node = next((n for n in checked.nodes if n.name.lower() == operator.lower()), None)
    if not isinstance(node, plan.Enrich):
        names = ", ".join(n.name for n in checked.nodes if isinstance(n, plan.Enrich)) or "none"
        raise ToolError(f"{flow}: no ENRICH '{operator}' (its ENRICH statements: {names})")
    path = letters or node.dead_letter
    if path is None:
        raise ToolError(f"{flow}: ENRICH '{node.name}' writes no dead letters; give --from PATH")
    folder = flow.resolve().parent
    where = (folder / path).resolve()
    if not where.exists():
        raise ToolError(f"no dead letters at {where} (ENRICH '{node.name}', line {node.line})")
    text = SourceFile.read(str(flow)).text
    statement = text[node.span.start:node.span.end].rstrip().rstrip(";")
    statement = _ENRICH_INPUT.sub(lambda m: m.group(1) + "__dslc_replayed", statement, count=1)
    statement = _DEAD_LETTER.sub(lambda m: m.group(1) + _quoted(f"{to}/dead_letters"), statement)
    upstream = checked.node(node.input)
    row = ", ".join(f"{_name(c.name)}: {c.type}" for c in upstream.schema)
    columns = ", ".join(f"`row`.{_name(c.name)} AS {_name(c.name)}" for c in upstream.schema)
    settings = checked.settings
    pipeline = f"PIPELINE {_name(settings.name)} MODE BATCH" + (
        f" CHECKPOINT {_quoted(settings.checkpoint)}" if settings.checkpoint else "") + (
        f" ANSWERS {_quoted(settings.answers)}" if settings.answers else "")
    lines = [f"-- dslc replay-dead-letters {flow.name} --operator {node.name}: generated, run, then removed",
             pipeline + ";",
             *[f"SET {key} = {_quoted(value)};" for key, value in settings.conf],
             f"SOURCE __dslc_letters FROM JSON {_quoted(str(where))}",
             f"  SCHEMA (operator STRING, `row` STRUCT<{row}>);",
             f"STREAM __dslc_replayed = SELECT {columns} FROM __dslc_letters "
             f"WHERE operator = {_quoted(node.name)};",
             statement + ";",
             f"SINK {_name(node.name)} TO PARQUET {_quoted(f'{to}/rows')} MODE OVERWRITE;", ""]
    return "\n".join(lines), where


def cmd_replay_dead_letters(args: argparse.Namespace) -> int:
    """dslc replay-dead-letters FILE --operator NAME [--from PATH] [--to DIR] [run options]."""
    from dslc.compiler.cli.commands import cmd_run

    flow = Path(args.file)
    to = args.to or f"target/replayed/{args.operator}"
    text, where = replay_flow(flow, args.operator, getattr(args, "source", None), to)
    replay = flow.resolve().parent / f".{flow.stem}.replay-{args.operator}.flow"
    replay.write_text(text, encoding="utf-8")
    try:
        args.file, args.mode, args.trigger = str(replay), "batch", None
        code = cmd_run(args)
    finally:
        replay.unlink(missing_ok=True)
    if code in (0, 5):
        print(f"dslc: replayed the dead letters of {args.operator} from {where}: answered rows in {to}/rows, "
              f"rows that failed again in {to}/dead_letters", flush=True)
    return code


def add_parser(sub) -> None:
    """The `replay-dead-letters` sub-command's arguments (and `dslc run`'s that apply)."""
    replay = sub.add_parser("replay-dead-letters",
                            help="feed an ENRICH's dead letters through the same ENRICH again")
    replay.add_argument("file")
    replay.add_argument("--operator", required=True, metavar="NAME", help="the ENRICH whose dead letters to feed")
    replay.add_argument("--from", dest="source", metavar="PATH",
                        help="the dead letters (default: the ENRICH's DEAD LETTER path)")
    replay.add_argument("--to", metavar="DIR",
                        help="where the answered rows (DIR/rows) and new dead letters (DIR/dead_letters) go "
                             "(default: target/replayed/NAME)")
    replay.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    replay.add_argument("--secrets", metavar="FILE",
                        help="NAME=value lines: the ${NAME} secrets of the call (else the environment)")
    replay.add_argument("--summary-json", metavar="FILE", help="write the run's outcome as JSON")
