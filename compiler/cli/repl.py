"""`dslc repl [FILE]`: build a pipeline one statement at a time, with completion, history,
errors shown inline, and `:show` to run the pipeline so far on real data.

A statement may span several lines: input continues until a top-level ';'. A statement is
accepted only when the whole program still checks (without requiring a SINK). When stdin is
not a terminal, statements and commands are read line by line from stdin, without prompts."""
from __future__ import annotations

import difflib
import os
import re
import shlex
import sys
import traceback
from pathlib import Path
from typing import Callable, Iterable, TextIO

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.document import Document

from dslc.compiler.cli.repl_session import Session, SparkUnavailable, statement_kind
from dslc.compiler.diagnostics import CompileError
from dslc.compiler.frontend.lexical import split_statements
from dslc.compiler.interactive.completion import KEYWORDS, complete, stream_names  # noqa: F401 (KEYWORDS: old import path)
from dslc.compiler.interactive.spark_runner import Interrupted, SparkRunner

PROMPT = "flow> "
CONTINUATION = "  ... "

COMMANDS = {
    ":plan": "show the logical plan",
    ":physical": "show the physical plan (chains)",
    ":code": "show the generated PySpark job",
    ":schema": ":schema NAME   columns of a stream or source",
    ":show": ":show NAME [n] [--dead-letters]  n rows of NAME (default 10), run in BATCH",
    ":load": ":load FILE      add the statements of a .flow file",
    ":test": ":test [FILE]    run the cases of NAME.test.yaml beside the loaded NAME.flow (docs/testing.md)",
    ":spark": ":spark [on|off]  Spark's analyzer checks each statement and gives its types (on unless --no-spark)",
    ":db": ":db [on|off]     also check SQL queries, database sources and sinks against the live DATABASEs",
    ":reset": "forget every statement",
    ":help": "this help",
    ":quit": "leave (Ctrl-D too)",
}

HELP = """\
Type .flow statements; a statement may span several lines and ends with ';'.
A statement is kept only when the whole pipeline still checks: by the fast check (dslc's own,
instant), then, when `:spark` is on, by Spark's analyzer on the REPL's Spark session (the same
check as `dslc check --spark`: every error Spark's analyzer finds, at its line), whose column
types are the ones shown. Commands:
""" + "\n".join(f"  {name:<10} {text}" for name, text in COMMANDS.items()) + """

:show has no side effects: it computes only NAME and what NAME reads, calls no service NAME
does not depend on, and writes nothing (no SINK, no dead letter, no checkpoint). Rows an ENRICH
would send to its DEAD LETTER are counted and kept in memory: `:show NAME --dead-letters`.
When the operators between the source and NAME are row-by-row (filters, projections, ENRICH,
PROCESS, MATCH), only n input rows reach the first ENRICH/PROCESS, so `:show enriched 5` makes
about 5 calls (fewer rows may come out when a filter or dead letter follows the ENRICH). It
cannot after an aggregation, join, DISTINCT, ORDER BY, LIMIT, window function or a relation read
twice: then every input row is read and called, and :show says so under the rows.
Ctrl-C cancels a running :show and returns to the prompt."""

_NAME_COMMAND = re.compile(r"^\s*:(schema|show)\s+([A-Za-z0-9_]*)$", re.I)
_COMMAND_WORD = re.compile(r"^\s*(:[a-z]*)$", re.I)


class FlowCompleter(Completer):
    """prompt_toolkit's view of dslc.compiler.interactive.completion over the session; plus command names
    after ':', and only stream and source names after `:schema`/`:show`."""

    def __init__(self, session: Session):
        self.session = session

    def get_completions(self, document: Document, complete_event) -> Iterable[Completion]:
        text = document.text_before_cursor
        command = _COMMAND_WORD.match(text)
        if command:
            word = command.group(1)
            for name in COMMANDS:
                if name.startswith(word.lower()):
                    yield Completion(name, -len(word), display_meta=COMMANDS[name].split("  ")[-1].strip())
            return
        named = _NAME_COMMAND.match(text)
        candidates = list(stream_names(named.group(2), self.session)) if named else complete(text, self.session)
        for candidate in candidates:
            yield Completion(candidate.text, -candidate.replaces, display_meta=candidate.kind)


def is_complete(text: str) -> bool:
    """True when Enter should submit the text: empty, a ':' command, or every statement ended."""
    if not text.strip() or text.lstrip().startswith(":"):
        return True
    done, rest = Session().add_text(text)
    return not rest.strip() or not re.sub(r"--[^\n]*", "", rest).strip()


class Repl:
    """Statements and commands in, text out; the same for a terminal and for a pipe."""

    def __init__(self, session: Session | None = None, out: TextIO | None = None, err: TextIO | None = None):
        self.session = session or Session()
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.pending = ""
        self.errors = 0
        self.done = False
        self.loaded: Path | None = None     # the last .flow file loaded: :test runs the test file beside it

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def complain(self, text: str) -> None:
        self.errors += 1
        print(text, file=self.err, flush=True)

    # ---- input
    def feed(self, text: str) -> None:
        """One line (or several) of input: a command when nothing is pending, else statement text."""
        if not self.pending.strip() and text.lstrip().startswith(":"):
            self.pending = ""
            self.command(text.strip())
            return
        done, self.pending = self.session.add_text(self.pending + text + "\n")
        for statement in done:
            self.statement(statement)

    def statement(self, text: str) -> None:
        try:
            try:
                plan = self.session.add(text)
            except SparkUnavailable as exc:
                self._spark_off(exc)
                plan = self.session.add(text)
        except CompileError as exc:
            self.complain(exc.render())
            return
        except (Interrupted, KeyboardInterrupt):
            self.complain("interrupted: the statement was not kept (Spark's analyzer was still starting; "
                          ":spark off checks with the fast check only)")
            return
        self.say(self._accepted(text, plan))

    def _spark_off(self, exc: SparkUnavailable) -> None:
        runner = self.session.runner
        log = f" (Spark's output: {runner.log_path})" if runner is not None and str(runner.log_path) not in str(exc) else ""
        # a warning, not an error: no statement was refused (piped input still exits 0)
        print(f"warning: Spark's analyzer is off: {exc}{log}\n"
              "statements are checked by the fast check only; :spark on tries again", file=self.err, flush=True)

    def _accepted(self, text: str, plan) -> str:
        kind = statement_kind(text)
        match = re.search(r"^\s*(?:--[^\n]*\n\s*)*[A-Za-z]+\s+(`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)", text)
        name = match.group(1).strip("`") if match else ""
        node = self.session.find_node(name) if kind in ("SOURCE", "STREAM", "BROADCAST") else None
        if node is not None:
            columns = ", ".join(f"{n} {t}" for n, t in self.session.schema_of(node))
            ours = self.session.differs(node)
            note = (f"\n-- the fast check inferred ({ours}); the types above are Spark's analyzer's, which the "
                    "job gets (please report the difference to dslc)") if ours is not None else ""
            return f"ok: {kind.lower()} {node.name} ({columns}){note}"
        return f"ok: {kind.lower()} {name}".rstrip()

    def command(self, line: str) -> None:
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        name, args = words[0].lower(), words[1:]
        handler: Callable[[list[str]], None] | None = getattr(self, "cmd_" + name[1:], None)
        if handler is None:
            guess = _command_meant(name)
            self.complain(f"unknown command {words[0]}; did you mean {guess}? (:help lists the commands)" if guess
                          else f"unknown command {words[0]}; :help lists the commands")
            return
        try:
            handler(args)
        except CompileError as exc:
            self.complain(exc.render())
        except SparkUnavailable as exc:
            self._spark_off(exc)
        except Interrupted:
            self.complain(f"interrupted: {words[0]} was cancelled")
        except (LookupError, ValueError, OSError) as exc:
            self.complain(f"error: {exc}")

    # ---- commands
    def cmd_help(self, args: list[str]) -> None:
        runner = self.session.runner
        self.say(HELP + (f"\nSpark's own output (start-up, warnings): {runner.log_path}" if runner else ""))

    def cmd_spark(self, args: list[str]) -> None:
        """:spark [on|off]: which check the statements get; turning it on checks the session again."""
        if len(args) > 1 or (args and args[0].lower() not in ("on", "off")):
            raise ValueError("usage: :spark [on|off]")
        if args and args[0].lower() == "off":
            self.session.spark_check = False
            self.session.spark = None
        elif args:
            if self.session.runner is None:
                self.session.runner = SparkRunner(self.err)
            self.session.runner.forget_failure()
            self.session.spark_check = True
            if self.session.statements:     # the statements kept so far, through Spark's analyzer now
                plan = self.session.plan or self.session.check(self.session.statements)
                try:
                    self.session.spark = self.session.analyze(self.session.statements, plan)
                except CompileError:
                    self.session.spark_check = False
                    raise
        self.say(f"checks: {self.session.checked_by}")

    def cmd_db(self, args: list[str]) -> None:
        """:db [on|off]: the live databases' check (dslc check --db); turning it on checks the
        statements kept so far, with the databases as they are now."""
        if len(args) > 1 or (args and args[0].lower() not in ("on", "off")):
            raise ValueError("usage: :db [on|off]")
        if args:
            from dslc.compiler.plan import live_database

            live_database.forget()
            self.session.db_check = args[0].lower() == "on"
            if self.session.db_check and self.session.statements:
                plan = self.session.plan or self.session.check(self.session.statements)
                try:
                    self.session.check_databases(self.session.statements, plan)
                except CompileError:
                    self.session.db_check = False
                    raise
        self.say(f"checks: {self.session.checked_by}")

    def cmd_quit(self, args: list[str]) -> None:
        self.done = True

    cmd_exit = cmd_q = cmd_quit

    def cmd_reset(self, args: list[str]) -> None:
        self.session.reset()
        self.pending = ""
        self.say("ok: session cleared")

    def _plan(self):
        return self.session.plan or self.session.check([])

    def cmd_plan(self, args: list[str]) -> None:
        from dslc.compiler.plan.explain import render_text
        self.say(render_text(self._plan()).rstrip("\n"))

    def cmd_physical(self, args: list[str]) -> None:
        from dslc.compiler.optimizer.explain import render_physical
        self.say(render_physical(self._plan(), "text").rstrip("\n"))

    def cmd_code(self, args: list[str]) -> None:
        self.say(self.session.render_code().rstrip("\n"))

    def cmd_schema(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ValueError("usage: :schema NAME")
        self.say(self.session.render_schema(args[0]))

    def cmd_load(self, args: list[str]) -> None:
        if len(args) != 1:
            raise ValueError("usage: :load FILE")
        path = Path(args[0]).expanduser()
        if not path.is_absolute() and self.session.statements:
            path = path if path.is_file() else self.session.folder / path
        try:
            count = self.session.load(path)
        except SparkUnavailable as exc:     # no JVM: loaded with the fast check
            self._spark_off(exc)
            count = self.session.load(path)
        self.loaded = path.resolve()
        self.say(f"ok: loaded {count} statement{'s' if count != 1 else ''} from {args[0]}")

    def cmd_test(self, args: list[str]) -> None:
        """:test [FILE]: the cases of a test file, on the REPL's Spark session (cancellable)."""
        if len(args) > 1:
            raise ValueError("usage: :test [FILE]")
        if args:
            path = Path(args[0]).expanduser()
            path = path if path.is_absolute() or path.is_file() else self.session.folder / path
        elif self.loaded is None:
            raise LookupError(":test runs NAME.test.yaml beside the loaded NAME.flow: :load a .flow file first, "
                              "or give the test file (:test FILE)")
        else:
            path = self.loaded.with_name(self.loaded.stem + ".test.yaml")
        if not path.is_file():
            raise LookupError(f"no test file {path} (docs/testing.md says how to write one)")
        from dslc.testing.runner import run_paths

        if self.session.runner is None:
            self.session.runner = SparkRunner(self.err)
        try:
            code = self.session.runner.run(":test", lambda spark: run_paths([str(path)], out=self.out, spark=spark))
        except (Interrupted, KeyboardInterrupt):
            self.complain("interrupted: the test run was cancelled")
            return
        if code:
            self.errors += 1      # piped input: `dslc repl` exits 1 when a case failed

    def cmd_show(self, args: list[str]) -> None:
        dead_letters = "--dead-letters" in args
        args = [a for a in args if a != "--dead-letters"]
        if not 1 <= len(args) <= 2:
            raise ValueError("usage: :show NAME [n] [--dead-letters]")
        rows = int(args[1]) if len(args) == 2 else 10
        if rows < 1:
            raise ValueError("n must be at least 1")
        if self.session.find_node(args[0]) is None:
            raise LookupError(self.session._unknown(args[0]))
        if self.session.runner is None:
            self.session.runner = SparkRunner(self.err)
        try:
            result = self.session.show(args[0], rows, dead_letters=dead_letters)
        except (CompileError, LookupError):
            raise
        except (Interrupted, KeyboardInterrupt):
            self.complain("interrupted: the job was cancelled")
            return
        except SystemExit as exc:
            if exc.code not in (None, 0):
                self.complain(f"error: the job exited with {exc.code}")
            return
        except Exception as exc:  # Spark's errors (AnalysisException, Py4J...) end the job, not the REPL
            detail = str(exc).strip().splitlines()
            self.complain(f"error: {type(exc).__name__}: {detail[0] if detail else ''}")
            if os.environ.get("DSLC_DEBUG"):
                traceback.print_exc()
            return
        self.say(result.table)
        for note in result.notes:
            self.say(f"-- {note}")


# what users of other tools type for a command the REPL names differently
_SYNONYMS = {":explain": ":plan (the logical plan, as dslc explain shows it) or :physical",
             ":run": ":show NAME", ":select": ":show NAME", ":describe": ":schema NAME", ":exit": ":quit"}


def _command_meant(name: str) -> str | None:
    """The command a mistyped `name` most likely means (`:shw` → `:show`), or None."""
    if name in _SYNONYMS:
        return _SYNONYMS[name]
    close = difflib.get_close_matches(name, [*COMMANDS, *_SYNONYMS], n=1, cutoff=0.6)
    return (_SYNONYMS.get(close[0], close[0])) if close else None


def _settings_of(file: str | None) -> dict:
    """The SETs of the file the REPL starts with (the JVM is started with them), if it checks."""
    if not file:
        return {}
    try:
        text = Path(file).read_text(encoding="utf-8", errors="replace")
        statements = [c.text for c in split_statements(text) if c.text.strip()]
        return dict(Session(folder=Path(file).resolve().parent).check(statements).settings.conf)
    except (CompileError, OSError):
        return {}


def _history_file() -> str:
    return os.environ.get("DSLC_HISTORY") or str(Path.home() / ".dslc_history")


def _interactive(repl: Repl) -> int:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event) -> None:
        buffer = event.current_buffer
        if buffer.complete_state and buffer.complete_state.current_completion:
            buffer.apply_completion(buffer.complete_state.current_completion)
            return
        if repl.pending.strip() or is_complete(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @bindings.add("escape", "enter")
    def _submit(event) -> None:
        event.current_buffer.validate_and_handle()

    history = _history_file()
    try:
        Path(history).parent.mkdir(parents=True, exist_ok=True)
        store = FileHistory(history)
    except OSError:
        from prompt_toolkit.history import InMemoryHistory
        store = InMemoryHistory()
    prompt = PromptSession(history=store, completer=FlowCompleter(repl.session), key_bindings=bindings,
                           multiline=True, prompt_continuation=lambda width, line, wrap: CONTINUATION,
                           complete_while_typing=False, enable_history_search=False)
    repl.say("dslc repl: statements end with ';', :help for commands, Ctrl-D to leave")
    repl.say(f"checks: {repl.session.checked_by}" + (" (Spark starts in the background; :spark off "
                                                     "or --no-spark for the fast check only)"
                                                     if repl.session.spark_check else ""))
    while not repl.done:
        try:
            text = prompt.prompt(CONTINUATION if repl.pending.strip() else PROMPT)
        except KeyboardInterrupt:
            repl.pending = ""
            continue
        except EOFError:
            break
        repl.feed(text)
    return 0


def _batch(repl: Repl, lines: Iterable[str]) -> int:
    for line in lines:
        repl.feed(line.rstrip("\n"))
        if repl.done:
            break
    if repl.pending.strip() and re.sub(r"--[^\n]*", "", repl.pending).strip():
        repl.complain("error: input ended inside a statement (missing ';')")
    return 1 if repl.errors else 0


def run_repl(file: str | None, spark: bool = True) -> int:
    """`dslc repl [FILE] [--no-spark]`: 0 on a normal exit; piped input gives 1 when anything was
    rejected. With `spark`, the JVM starts in the background at once (with the file's SETs), and
    each statement is checked by Spark's analyzer too, as soon as it is entered."""
    session = Session(folder=Path(file).resolve().parent if file else Path.cwd(), spark_check=spark)
    repl = Repl(session)
    if spark:
        session.runner = SparkRunner(repl.err)
        session.runner.start_in_background(_settings_of(file))
    if file:
        try:
            try:
                count = session.load(file)
            except SparkUnavailable as exc:     # no JVM: the file is loaded with the fast check
                repl._spark_off(exc)
                count = session.load(file)
        except (Interrupted, KeyboardInterrupt):
            repl.complain(f"{file}: not loaded (interrupted while Spark's analyzer was starting); "
                          "starting with an empty session")
        except CompileError as exc:
            repl.complain(exc.render())
            repl.say(f"{file}: not loaded; starting with an empty session")
        except OSError as exc:
            repl.complain(f"{file}: error: cannot read file ({exc.strerror})")
        else:
            repl.loaded = Path(file).resolve()
            repl.say(f"ok: loaded {count} statement{'s' if count != 1 else ''} from {file}")
    if not sys.stdin.isatty():
        return _batch(repl, sys.stdin)
    return _interactive(repl)
