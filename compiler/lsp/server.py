"""`dslc lsp`: the server's wiring. pygls speaks the protocol over stdio; each open document is
checked by the compiler on one worker thread (so the protocol keeps flowing while a long file is
checked), a short pause after the last keystroke, and its diagnostics are published when the
check of the newest version ends. Each document keeps what its checks computed
(compiler/lsp/incremental.py), so an edit costs about what it changed; a check of a version that
is no longer the newest is skipped, or abandoned at its next statement, so it never delays the
newest one. Requests (completion, hover, ...) use the newest version's analysis, waiting for it
when typing got ahead. A failure inside a feature is logged and answered with nothing: the server
outlives any input. With Spark's analyzer on (compiler/lsp/spark_check.py), each published
version is then analyzed by Spark on a thread of its own and published again with Spark's
diagnostics added; hover shows Spark's types for that version."""
from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import wraps
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from dslc.compiler.lsp import completion, diagnostics, hover, lenses, symbols
from dslc.compiler.lsp.analysis import Analysis, analyze
from dslc.compiler.lsp.incremental import ENTRIES, EditorCache, Superseded
from dslc.compiler.lsp.positions import LineIndex
from dslc.compiler.lsp.spark_check import SparkChecker, SparkUnavailable
from dslc.compiler.source import TextSource

DEBOUNCE_S = 0.04        # how long typing must pause before a check starts
COMPLETION_WAIT_S = 0.15  # completion waits this long for the newest version's names, then uses the last ones
log = logging.getLogger("dslc.lsp")


@dataclass
class Document:
    """An open document, the version last checked, and the check under way."""

    uri: str
    path: Path | None               # None: not a file on disk (untitled:, ...)
    base: str                       # where PYTHON 'module:fn' and relative paths resolve
    checked: tuple[int, Analysis, LineIndex] | None = None
    running: tuple[int, asyncio.Future] | None = None
    timer: asyncio.Task | None = field(default=None, repr=False)
    salvaged: Analysis | None = None    # the newest analysis whose program and plan are computed
    newest: int = 0                     # the newest version the client sent (read by the checking thread)
    cache: EditorCache = field(default_factory=EditorCache, repr=False)
    spark: tuple[Analysis, object] | None = field(default=None, repr=False)   # Spark's analysis of a version
    check_s: float = 0.0                # how long the last check that ended took (wall time)


class FlowServer(LanguageServer):
    """The LanguageServer plus the open documents and the checking thread. `incremental=False`
    checks every version from scratch, as the server did before it kept a cache (the bench
    compares both, bench/lsp_latency.py)."""

    def __init__(self, incremental: bool = True, spark: bool = False, db: bool = False) -> None:
        self.incremental = incremental
        self.db = db        # dslc lsp --db: also the live DATABASEs' check
        self.spark = SparkChecker(spark)
        try:
            release = version("dslc")
        except PackageNotFoundError:
            release = "0"
        # an edit sends what changed, not the whole text (a 5,000-statement file is 500 KB)
        super().__init__("dslc", release, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.documents: dict[str, Document] = {}
        self.checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dslc-check")

    # ---- documents
    def document(self, uri: str) -> Document:
        doc = self.documents.get(uri)
        if doc is None:
            path = to_fs_path(uri)
            fs_path = Path(path) if path else None
            base = str(fs_path.parent) if fs_path else self._workspace_folder()
            doc = self.documents[uri] = Document(uri, fs_path, base, cache=EditorCache(0 if not self.incremental else ENTRIES))
        return doc

    def _workspace_folder(self) -> str:
        for folder in self.workspace.folders.values():
            path = to_fs_path(folder.uri)
            if path and Path(path).is_dir():
                return path
        root = self.workspace.root_path
        return root if root and Path(root).is_dir() else os.getcwd()

    def opened(self, uri: str) -> Document | None:
        """The open document of a request (None: the client never opened it, or closed it)."""
        if uri in self.documents and uri in self.workspace.text_documents:
            return self.documents[uri]
        return None

    def text(self, doc: Document) -> tuple[int, str]:
        document = self.workspace.get_text_document(doc.uri)
        return document.version or 0, document.source

    async def analysis(self, doc: Document, *, salvage: bool = False) -> tuple[Analysis, LineIndex]:
        """The analysis of the newest version (checked now, or awaited when a check is running);
        `salvage` also computes the program and plan of the statements that check. A check (or a
        salvage) overtaken by a newer version gives up: then the newest one is awaited instead."""
        while True:
            number, text = self.text(doc)
            if doc.checked is not None and doc.checked[0] == number:
                _, analysis, index = doc.checked
            else:
                result = await self._checked(doc, number, text)
                if result is None:
                    continue
                if doc.checked is None or doc.checked[0] < number:
                    doc.checked = (number, *result)
                analysis, index = result
            if not salvage or doc.salvaged is analysis:
                return analysis, index
            if await asyncio.get_running_loop().run_in_executor(
                    self.checker, _salvage, analysis, lambda wanted=number: doc.newest <= wanted):
                doc.salvaged = analysis
                return analysis, index

    async def _checked(self, doc: Document, number: int, text: str) -> tuple[Analysis, LineIndex] | None:
        """Version `number` checked on the checking thread (the check under way when it is that
        version's); None when a newer version overtook it."""
        if doc.running is None or doc.running[0] != number:
            path = str(doc.path) if doc.path else doc.uri
            encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
            future = asyncio.get_running_loop().run_in_executor(
                self.checker, _check, text, path, doc.base, encoding, doc.cache,
                lambda wanted=number: doc.newest <= wanted, self.db)
            doc.running = (number, future)
        running = doc.running
        started = time.monotonic()
        result = await asyncio.shield(running[1])
        if doc.running is running:
            doc.running = None
        if result is not None:
            doc.check_s = time.monotonic() - started
        return result

    async def recent(self, doc: Document) -> tuple[Analysis, LineIndex]:
        """For hover and completion, which must not lag behind typing in a long file: the newest
        version's analysis if it is ready soon, else the last one checked and salvaged (its
        names, schemas and statements; the text around the cursor is always the newest, in the
        LineIndex returned, and compiler/lsp/stale.py finds the older offsets across the edit)."""
        newest = asyncio.ensure_future(self.analysis(doc, salvage=True))
        # a document whose checks take longer than the wait does not wait at all
        wait = COMPLETION_WAIT_S if doc.check_s <= COMPLETION_WAIT_S else 0
        try:
            return await asyncio.wait_for(asyncio.shield(newest), wait)
        except asyncio.TimeoutError:
            last = self._last_known(doc)
            if last is None:
                return await newest
            _, text = self.text(doc)
            encoding = self.workspace.position_encoding or types.PositionEncodingKind.Utf16
            return last, LineIndex(text, encoding)

    @staticmethod
    def _last_known(doc: Document) -> Analysis | None:
        """The newest analysis whose program and plan are at hand without any work."""
        if doc.checked is not None and doc.checked[1].complete:
            return doc.checked[1]
        return doc.salvaged

    async def publish(self, doc: Document) -> None:
        """Check the newest version and publish its diagnostics, unless a newer one came meanwhile."""
        number, _ = self.text(doc)
        analysis, index = await self.analysis(doc)
        if self.documents.get(doc.uri) is doc and self.text(doc)[0] == number:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                doc.uri, diagnostics.to_lsp(analysis, doc.uri, index), version=number))
            if self.spark.enabled:
                await self.publish_spark(doc, number, analysis, index)

    async def publish_spark(self, doc: Document, number: int, analysis: Analysis, index: LineIndex) -> None:
        """Spark's analysis of version `number`, published with the fast diagnostics when that
        version is still the newest; dropped otherwise."""
        def current() -> bool:
            return doc.newest <= number and self.documents.get(doc.uri) is doc

        try:
            found = await asyncio.shield(asyncio.ensure_future(self.spark.analyze(analysis, current)))
        except SparkUnavailable as exc:
            if not self.spark.enabled:
                return          # said once already, for the document that found out first
            self.spark.enabled = False
            self.window_show_message(types.ShowMessageParams(
                types.MessageType.Warning,
                f"dslc: Spark's analyzer is off ({exc}); diagnostics come from the fast check only"))
            return
        if found is None or not current() or self.text(doc)[0] != number:
            return          # a newer version is being checked: this one's result is stale
        doc.spark = (analysis, found)
        both = diagnostics.to_lsp(analysis, doc.uri, index) + diagnostics.from_spark(found.problems, doc.uri, index)
        both.sort(key=lambda d: (d.range.start.line, d.range.start.character))
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(doc.uri, both, version=number))

    def spark_schemas(self, doc: Document, analysis: Analysis) -> dict | None:
        """Spark's schemas of exactly this analysis's version, if Spark analyzed it."""
        if doc.spark is not None and doc.spark[0] is analysis:
            return doc.spark[1].schemas
        return None

    def schedule(self, doc: Document, delay: float) -> None:
        """(Re)start the pause before checking: only the last of a burst of edits is checked."""
        if doc.timer is not None and not doc.timer.done():
            doc.timer.cancel()

        async def later() -> None:
            await asyncio.sleep(delay)
            try:
                await self.publish(doc)
            except asyncio.CancelledError:
                raise
            except Exception:      # never let a check take the server down
                log.error("checking %s failed:\n%s", doc.uri, traceback.format_exc())

        doc.timer = asyncio.get_running_loop().create_task(later())


def _check(text: str, path: str, base: str, encoding: str, cache: EditorCache,
           current: Callable[[], bool], db: bool = False) -> tuple[Analysis, LineIndex] | None:
    """Runs on the checking thread; None when a newer version arrived before it ended (`current`
    turned False). A compiler bug becomes one diagnostic, not a dead server."""
    if not current():
        log.debug("a check of %s skipped: a newer version is waiting", path)
        return None
    try:
        with cache.checking(current):
            analysis = analyze(text, path, base, cache, db=db)
        return analysis, LineIndex(text, encoding)
    except Superseded:
        log.debug("a check of %s stopped: a newer version is waiting", path)
        return None
    except RecursionError:
        return _internal(text, path, base, "the file nests too deeply to check"), LineIndex(text, encoding)
    except Exception as exc:  # a bug in dslc: say so where the user looks
        log.error("dslc check failed on %s:\n%s", path, traceback.format_exc())
        return (_internal(text, path, base, f"internal error in dslc ({type(exc).__name__}: {exc}); please report it"),
                LineIndex(text, encoding))


def _internal(text: str, path: str, base: str, message: str) -> Analysis:
    return Analysis(TextSource(path, text, base=base), [], failure=message)


def _salvage(analysis: Analysis, current: Callable[[], bool]) -> bool:
    """Compute the program and plan of the statements that check, now (so a failure is logged
    here); False when a newer version overtook it before it ended."""
    try:
        with analysis.checking(current):
            _ = analysis.program, analysis.plan
    except Superseded:
        log.debug("a salvage of %s stopped: a newer version is waiting", analysis.source.path)
        return False
    except Exception:
        log.error("salvaging a plan failed:\n%s", traceback.format_exc())
    return True


def _answer_none_on_failure(handler):
    """A feature that fails answers with nothing and logs why (the server keeps serving)."""
    @wraps(handler)
    async def guarded(*args, **kwargs):
        try:
            return await handler(*args, **kwargs)
        except Exception:
            log.error("%s failed:\n%s", handler.__name__, traceback.format_exc())
            return None
    return guarded


# How a request gets the analysis it answers from (FlowServer methods).
Analyzed = Callable[[FlowServer, Document], Awaitable[tuple[Analysis, LineIndex]]]


def _newest_salvaged(ls: FlowServer, doc: Document):
    return ls.analysis(doc, salvage=True)


def _newest(ls: FlowServer, doc: Document):
    return ls.analysis(doc)


def _recent(ls: FlowServer, doc: Document):
    return ls.recent(doc)


def _document_request(server: FlowServer, method: str, options=None, *, analyzed: Analyzed = _newest_salvaged):
    """Register a request about one open document: the handler gets the document, its analysis
    and line index, and the request's parameters. A document the client did not open (or
    closed) gets nothing; a failure answers nothing and is logged."""
    def register(answer: Callable[..., object]):
        async def handler(ls: FlowServer, params):
            doc = ls.opened(params.text_document.uri)
            if doc is None:
                return None
            analysis, index = await analyzed(ls, doc)
            return answer(doc, analysis, index, params)
        handler.__name__ = handler.__qualname__ = answer.__name__   # not wraps: pygls reads the signature
        server.feature(method, options)(_answer_none_on_failure(handler))
        return answer
    return register


def build_server(incremental: bool = True, spark: bool = False, db: bool = False) -> FlowServer:
    """A server with every feature registered; `spark`: Spark's analyzer on from the start; `db`:
    the live DATABASEs' check (also the initialization option db: true)."""
    server = FlowServer(incremental, spark, db)
    _settings(server)
    _document_sync(server)
    _requests(server)
    _commands(server)
    return server


def _settings(server: FlowServer) -> None:
    """initialize and workspace/didChangeConfiguration: whether Spark's analyzer runs."""

    @server.feature(types.INITIALIZE)
    def initialize(ls: FlowServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("spark"), bool):
            ls.spark.enabled = options["spark"]
        if isinstance(options, dict) and isinstance(options.get("db"), bool):
            ls.db = options["db"]
        ls.spark.start()        # the JVM starts now, in the background, when the check is on

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def configuration(ls: FlowServer, params: types.DidChangeConfigurationParams) -> None:
        settings = params.settings if isinstance(params.settings, dict) else {}
        wanted = (settings.get("dslc") or {}).get("spark") if isinstance(settings.get("dslc"), dict) else None
        if isinstance(wanted, bool) and wanted != ls.spark.enabled:
            ls.spark.enable(wanted)
            for doc in list(ls.documents.values()):     # publish again: with Spark's, or without
                doc.spark = None
                ls.schedule(doc, 0)


def _document_sync(server: FlowServer) -> None:
    """didOpen, didChange, didSave, didClose: each schedules a check, or forgets the document."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: FlowServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = ls.document(params.text_document.uri)
        doc.newest = params.text_document.version or 0
        ls.schedule(doc, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    async def did_change(ls: FlowServer, params: types.DidChangeTextDocumentParams) -> None:
        doc = ls.document(params.text_document.uri)
        doc.newest = params.text_document.version or 0     # a check of an older one stops now
        ls.schedule(doc, DEBOUNCE_S)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: FlowServer, params: types.DidSaveTextDocumentParams) -> None:
        doc = ls.opened(params.text_document.uri)
        if doc is None:
            return
        doc.checked = doc.running = None    # a module beside the file may have appeared meanwhile
        ls.schedule(doc, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: FlowServer, params: types.DidCloseTextDocumentParams) -> None:
        doc = ls.documents.pop(params.text_document.uri, None)
        if doc is not None and doc.timer is not None:
            doc.timer.cancel()
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(params.text_document.uri, []))


def _requests(server: FlowServer) -> None:
    """The requests answered from a document's analysis."""

    @_document_request(server, types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=["."]),
                       analyzed=_recent)
    def complete(doc: Document, analysis: Analysis, index: LineIndex, params: types.CompletionParams):
        return completion.completions(analysis, index, index.offset(params.position))

    @_document_request(server, types.TEXT_DOCUMENT_HOVER, analyzed=_recent)
    def on_hover(doc: Document, analysis: Analysis, index: LineIndex, params: types.HoverParams):
        return hover.hover(analysis, index, index.offset(params.position), server.spark_schemas(doc, analysis))

    @_document_request(server, types.TEXT_DOCUMENT_DEFINITION)
    def on_definition(doc: Document, analysis: Analysis, index: LineIndex, params: types.DefinitionParams):
        return symbols.definition(analysis, index, doc.uri, index.offset(params.position))

    @_document_request(server, types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def on_symbols(doc: Document, analysis: Analysis, index: LineIndex, params: types.DocumentSymbolParams):
        return symbols.document_symbols(analysis, index)

    @_document_request(server, types.TEXT_DOCUMENT_CODE_LENS, analyzed=_newest)
    def on_code_lens(doc: Document, analysis: Analysis, index: LineIndex, params: types.CodeLensParams):
        return lenses.code_lenses(analysis, index, doc.uri, doc.path)


def _commands(server: FlowServer) -> None:
    """The code lenses' commands: explain the plan, run the tests beside the file."""

    @server.command(lenses.EXPLAIN)
    async def explain(ls: FlowServer, uri: str) -> dict:
        doc = ls.opened(uri)
        if doc is None:
            return {"ok": False, "text": f"{uri} is not open in the editor"}
        analysis, _ = await ls.analysis(doc)
        return await asyncio.get_running_loop().run_in_executor(ls.checker, lenses.explain, analysis)

    @server.command(lenses.RUN_TESTS)
    async def run_tests(ls: FlowServer, uri: str) -> dict:
        path = to_fs_path(uri)
        if not path:
            return {"ok": False, "text": "save the file first: dslc test runs the test files beside it"}
        return await lenses.run_tests(Path(path))


def main(incremental: bool = True, spark: bool = False, db: bool = False) -> int:
    """Serve over stdin/stdout until the client says exit. Anything printed by mistake goes to
    stderr: stdout carries the protocol only."""
    logging.basicConfig(level=os.environ.get("DSLC_LSP_LOG", "WARNING").upper(), stream=sys.stderr,
                        format="dslc lsp: %(levelname)s %(message)s")
    protocol_out = sys.stdout.buffer
    sys.stdout = sys.stderr
    build_server(incremental, spark, db).start_io(sys.stdin.buffer, protocol_out)
    return 0
