"""The option names Spark's readers and writers take, per built-in format, and the check of a
SOURCE's or SINK's OPTIONS against them.

Spark passes every option to the data source as a string and ignores a name the source does not
read, without a word: `OPTIONS (headr = 'true')` reads a CSV's header row as data, which then
reaches the services and the sinks. So `dslc check` knows the names and reports any other one
(E0315, with a did-you-mean hint). Names are matched as Spark matches them, case-insensitively.

The lists are Spark's own: the options objects of the data sources (`CSVOptions`, `JSONOptions`,
`ParquetOptions`, `TextOptions`, `FileIndexOptions`, `FileStreamOptions`, `KafkaSourceProvider`,
`RateStreamProvider`, the console sink), read with their scope (read, write) from the "Data Source
Option" tables of Spark's documentation (sql-data-sources-*.md, structured-streaming-*.md).
tests/frontend/test_format_options.py holds them against the names the installed Spark declares.

A dotted key of a file format (`fs.s3a.endpoint`, `parquet.block.size`) is a Hadoop setting
(Spark copies every option into the job's Hadoop configuration), and `kafka.`-prefixed keys go to
the Kafka client: neither is checked. PYTHON sources and sinks take the user's own options.
"""
from __future__ import annotations

from dataclasses import dataclass

from dslc.compiler.diagnostics import Diagnostic, did_you_mean, error
from dslc.compiler.frontend import ast


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True, slots=True)
class Format:
    """What one format's reader and writer take. `streaming_read`: only the streaming reader
    acts on them (accepted in both modes: one file runs in both); `batch_read`: the streaming
    reader refuses them when the query starts."""

    read: frozenset[str]
    write: frozenset[str]
    docs: str
    streaming_read: frozenset[str] = frozenset()
    batch_read: frozenset[str] = frozenset()
    passthrough: tuple[str, ...] = ()       # key prefixes another library reads ("." = any dotted key)

    def reader(self) -> frozenset[str]:
        return self.read | self.streaming_read | self.batch_read


_DOCS = "https://spark.apache.org/docs/latest/"

# Generic File Source Options (sql-data-sources-generic-options.md, FileIndexOptions): every file reader.
_FILES = _names("ignoreCorruptFiles ignoreMissingFiles pathGlobFilter recursiveFileLookup basePath "
                "ignoreInvalidPartitionPaths ignoredPathSegmentRegex timeZone")
_FILES_BATCH = _names("modifiedBefore modifiedAfter")
# The file stream source (structured-streaming-programming-guide.md, "Input Sources"; FileStreamOptions).
_FILES_STREAMING = _names("maxFilesPerTrigger maxBytesPerTrigger latestFirst fileNameOnly maxFileAge "
                          "maxCachedFiles discardCachedInputRatio cleanSource sourceArchiveDir")
# Every file writer (DataFrameWriter, the file stream sink).
_FILE_WRITES = _names("compression maxRecordsPerFile partitionOverwriteMode retention")

_CSV_BOTH = _names("sep delimiter encoding charset quote escape comment header ignoreLeadingWhiteSpace "
                   "ignoreTrailingWhiteSpace nullValue dateFormat timestampFormat timestampNTZFormat timeFormat "
                   "charToEscapeQuoteEscaping emptyValue lineSep timeZone")
_JSON_BOTH = _names("timeZone dateFormat timestampFormat timestampNTZFormat timeFormat encoding charset lineSep")

FORMATS: dict[str, Format] = {
    "CSV": Format(
        read=_CSV_BOTH | _FILES | _names(
            "inferSchema preferDate enforceSchema nanValue positiveInf negativeInf "
            "enableDateTimeParsingFallback maxColumns maxCharsPerColumn mode columnNameOfCorruptRecord multiLine "
            "samplingRatio locale unescapedQuoteHandling inputBufferSize singleVariantColumn columnPruning"),
        write=_CSV_BOTH | _FILE_WRITES | _names("extension quoteAll escapeQuotes codec"),
        docs=_DOCS + "sql-data-sources-csv.html", streaming_read=_FILES_STREAMING, batch_read=_FILES_BATCH,
        passthrough=(".",)),
    "JSON": Format(
        read=_JSON_BOTH | _FILES | _names(
            "primitivesAsString prefersDecimal allowComments allowUnquotedFieldNames allowSingleQuotes "
            "allowNumericLeadingZeros allowBackslashEscapingAnyCharacter mode columnNameOfCorruptRecord "
            "enableDateTimeParsingFallback multiLine allowUnquotedControlChars samplingRatio dropFieldIfAllNull "
            "locale allowNonNumericNumbers inferTimestamp useUnsafeRow singleVariantColumn explodeEmbeddedArray"),
        write=_JSON_BOTH | _FILE_WRITES | _names("ignoreNullFields pretty sortKeys writeNonAsciiCharacterAsCodePoint"),
        docs=_DOCS + "sql-data-sources-json.html", streaming_read=_FILES_STREAMING, batch_read=_FILES_BATCH,
        passthrough=(".",)),
    "PARQUET": Format(
        read=_FILES | _names("mergeSchema datetimeRebaseMode int96RebaseMode"),
        write=_FILE_WRITES | _names("parquet.compression"),
        docs=_DOCS + "sql-data-sources-parquet.html", streaming_read=_FILES_STREAMING, batch_read=_FILES_BATCH,
        passthrough=(".",)),
    "TEXT": Format(
        read=_FILES | _names("wholetext lineSep encoding"),
        write=_FILE_WRITES | _names("lineSep encoding"),
        docs=_DOCS + "sql-data-sources-text.html", streaming_read=_FILES_STREAMING, batch_read=_FILES_BATCH,
        passthrough=(".",)),
    # RateStreamProvider; numRows is dslc's own: the length of a BATCH run (runtime/spark/sources.py)
    "RATE": Format(read=_names("rowsPerSecond rampUpTime numPartitions numRows"), write=frozenset(),
                   docs=_DOCS + "structured-streaming-programming-guide.html#input-sources"),
    "KAFKA": Format(
        read=_names("assign subscribe subscribePattern startingOffsets endingOffsets startingTimestamp "
                    "endingTimestamp startingOffsetsByTimestamp endingOffsetsByTimestamp "
                    "startingOffsetsByTimestampStrategy failOnDataLoss kafkaConsumer.pollTimeoutMs "
                    "fetchOffset.numRetries fetchOffset.retryIntervalMs maxOffsetsPerTrigger minOffsetsPerTrigger "
                    "maxTriggerDelay minPartitions maxRecordsPerPartition groupIdPrefix includeHeaders"),
        write=_names("topic includeHeaders"),
        docs=_DOCS + "structured-streaming-kafka-integration.html", passthrough=("kafka.",)),
    "CONSOLE": Format(read=frozenset(), write=_names("numRows truncate"),
                      docs=_DOCS + "structured-streaming-programming-guide.html#output-sinks"),
}

_ROLES = {"SOURCE": ("reader", "writer"), "SINK": ("writer", "reader")}


def check(connector: str, role: str, opt: ast.Opt, mode: str, problems: list[Diagnostic]) -> None:
    """Report every key of a SOURCE's or SINK's OPTIONS clause that Spark's `connector` reader
    (role SOURCE) or writer (SINK) does not take, at the key; in STREAMING, a key the streaming
    reader refuses."""
    fmt = FORMATS.get(connector)
    if fmt is None:         # PYTHON: the user's own options
        return
    own, other = (fmt.reader(), fmt.write) if role == "SOURCE" else (fmt.write, fmt.reader())
    canonical = {name.lower(): name for name in own}
    for key, _value in opt.args:
        name = key.value
        if name.lower() in canonical or any(_passes(name, prefix) for prefix in fmt.passthrough):
            if mode == "STREAMING" and role == "SOURCE" and name.lower() in {b.lower() for b in fmt.batch_read}:
                problems.append(_streaming_refuses(key, canonical[name.lower()]))
            continue
        problems.append(_unknown(key, connector, role, fmt, own, other))


def _passes(name: str, prefix: str) -> bool:
    return "." in name if prefix == "." else name.lower().startswith(prefix)


def _unknown(key: ast.Str, connector: str, role: str, fmt: Format, own: frozenset[str],
             other: frozenset[str]) -> Diagnostic:
    mine, theirs = _ROLES[role]
    if key.value.lower() in {o.lower() for o in other}:
        why = f"it is an option of Spark's {connector} {theirs}; the {mine} ignores it"
        hint = (f"give it to a SINK ... TO {connector}" if role == "SOURCE" else
                f"give it to the SOURCE ... FROM {connector} that reads these files")
        if not own:
            why = f"it is an option of Spark's {connector} {theirs}, and there is no {connector} {mine}"
    else:
        why = f"Spark's {connector} {mine} would ignore it silently"
        hint = did_you_mean(key.value, sorted(own)) or f"Spark's {connector} options: {fmt.docs}"
    return error("E0315", key.span, name=key.value, connector=connector, role=role, why=why, hint=hint)


def _streaming_refuses(key: ast.Str, name: str) -> Diagnostic:
    return error("E0311", key.span, feature=f"OPTIONS ({name} = ...) of a file SOURCE", mode="STREAMING",
                 why=f"Spark's file stream source refuses it (\"option '{name.lower()}' is not allowed in file "
                     "stream sources\")",
                 hint="in STREAMING, OPTIONS (maxFileAge = '7d') skips files older than that (counted from the "
                      "newest file); or run this SOURCE in BATCH")
