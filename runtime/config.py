"""Frozen, validated configuration of runtime operators.

The compiler builds these objects from the plan (compiler/codegen/configs.py), so their checks
run at compile time, and writes each back into the job as the keyword constructor call that
rebuilds it (`C.Enrich(name=..., ...)`, defaults left out). They are the contract between the
compiler and the runtime: plain values only (str, int, float, tuples, enums), picklable, and
checked on construction, so a bad value never reaches an executor.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from dslc.runtime.calls.prompt import fill_text
from dslc.runtime.calls.url import placeholders
from dslc.runtime.secrets import Secrets, secret_names


class Mode(str, Enum):
    """Emission order of an async operator."""

    ORDERED = "ORDERED"
    UNORDERED = "UNORDERED"


class Outcome(str, Enum):
    """What happens to an element whose call missed, timed out or failed."""

    FAIL = "FAIL"
    NULL = "NULL"
    DROP = "DROP"
    DEAD_LETTER = "DEAD_LETTER"
    RETRY = "RETRY"  # only for ON MISS: a miss is retried like an error


#: Name of the extra string column that carries dead letters out of an Arrow chain.
DEAD_LETTER_COLUMN = "__dslc_dead_letter"


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True, slots=True)
class Column:
    """One output column: name and Spark SQL type string (`DOUBLE`, `STRING`, ...)."""

    name: str
    type: str


@dataclass(frozen=True, slots=True)
class HttpCall:
    """HTTP GET or POST with `{column}` placeholders filled by URL-encoded row values; a POST
    sends the `body` columns (all the row's when None) as one JSON object."""

    url: str
    method: str = "GET"
    body: tuple[str, ...] | None = None
    # HEADERS (name = value, ...): values may hold `${NAME}` secrets, filled on the executor
    headers: tuple[tuple[str, str], ...] = ()
    # ANSWER 'jmespath': where the result sits in the JSON answer (None: the whole answer)
    answer: str | None = None
    # OPTIONS (ca_file = '...', verify = 'false'): the CA that signs the service's certificate
    # (read by the job's driver and shipped with the config), or no verification at all
    ca_file: str | None = None
    verify: bool = True
    ca_data: str | None = None      # the CA file's PEM text, read by the job's driver at start

    def __post_init__(self) -> None:
        _require(self.method in ("GET", "POST"), f"unsupported HTTP method {self.method!r}")
        _require(self.body is None or self.method == "POST", "BODY needs HTTP POST")
        _require(all(name and value for name, value in self.headers), "a header needs a name and a value")

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Columns named by the URL's `{column}` placeholders, in order, without repeats."""
        return placeholders(self.url)

    @property
    def columns(self) -> tuple[str, ...] | None:
        """Input columns a request carries (None: every column, a POST without BODY)."""
        if self.method == "POST":
            return None if self.body is None else tuple(dict.fromkeys(self.placeholders + self.body))
        return self.placeholders


@dataclass(frozen=True, slots=True)
class ModelCall:
    """WITH MODEL: `POST {base_url}/chat/completions` of an OpenAI-compatible API, the SYSTEM and
    PROMPT messages filled with the row's `{column}` text, the answer asked for as JSON that fits
    RETURNS (structured output, strict)."""

    model: str
    base_url: str
    prompt: str
    system: str | None = None
    # HEADERS (name = value, ...): values may hold `${NAME}` secrets, filled on the executor
    headers: tuple[tuple[str, str], ...] = ()
    # (column, JSON Schema keyword, value): what an EXPECT on the answers asks of them in the
    # structured-output schema (enum, minimum, maximum, exclusiveMinimum, exclusiveMaximum)
    limits: tuple[tuple[str, str, object], ...] = ()
    # OPTIONS (ca_file = '...', verify = 'false'), as HTTP's (ca_data: the CA the driver read)
    ca_file: str | None = None
    verify: bool = True
    ca_data: str | None = None

    def __post_init__(self) -> None:
        _require(bool(self.model), "MODEL needs a model name")
        _require(self.base_url.startswith(("http://", "https://")), "MODEL AT needs an http(s):// URL")

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Columns named by `{column}` in SYSTEM and PROMPT, in order, without repeats."""
        return tuple(dict.fromkeys(placeholders(self.system or "") + placeholders(self.prompt)))

    @property
    def columns(self) -> tuple[str, ...]:
        """Input columns a request carries."""
        return self.placeholders

    @property
    def key_names(self) -> tuple[str, ...]:
        """Names of the call key's parts (recordings, `dslc test` answers): the filled prompt,
        and the filled SYSTEM message when it has placeholders of its own."""
        return ("system", "prompt") if placeholders(self.system or "") else ("prompt",)

    def call_key(self, row) -> dict[str, str | None]:
        """The call key of a row: the filled messages (None where a placeholder is null)."""
        key = {"prompt": fill_text(self.prompt, row)}
        if "system" in self.key_names:
            key = {"system": fill_text(self.system or "", row), **key}
        return key


@dataclass(frozen=True, slots=True)
class EmbeddingCall:
    """WITH EMBEDDING: `POST {base_url}/embeddings` of an OpenAI-compatible API with the INPUT
    text filled from the row (with BATCH, one request carries the inputs of the batch)."""

    model: str
    base_url: str
    input: str
    headers: tuple[tuple[str, str], ...] = ()     # as MODEL's
    ca_file: str | None = None                    # OPTIONS (...), as MODEL's and HTTP's
    verify: bool = True
    ca_data: str | None = None

    def __post_init__(self) -> None:
        _require(bool(self.model), "EMBEDDING needs a model name")
        _require(self.base_url.startswith(("http://", "https://")), "EMBEDDING AT needs an http(s):// URL")

    @property
    def placeholders(self) -> tuple[str, ...]:
        return placeholders(self.input)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.placeholders

    key_names = ("input",)

    def call_key(self, row) -> dict[str, str | None]:
        return {"input": fill_text(self.input, row)}


#: The calls that speak HTTP and so take OPTIONS (ca_file = ..., verify = ...): whom they trust.
TRUSTING_CALLS = (HttpCall, ModelCall, EmbeddingCall)


@dataclass(frozen=True, slots=True)
class SqlCall:
    """WITH SQL db 'SELECT ...': a read-only query of a PostgreSQL database, its `{col}`
    placeholders made bind parameters `($n::type)` of `params` (compiler/plan/sql_lookup.py). With
    BATCH, `batch_query` answers the distinct values of `batch_key` at once (`= ANY($1)`), its rows
    matched back by their `__dslc_key` column. `url` is as written (`${NAME}` secrets filled on the
    executor); at most `pool` connections per Python worker (OPTIONS (pool = n))."""

    database: str
    url: str
    query: str
    params: tuple[str, ...] = ()
    batch_query: str | None = None
    batch_key: str | None = None
    pool: int = 10

    def __post_init__(self) -> None:
        _require(self.url.startswith(("postgresql://", "postgres://")), "DATABASE needs a postgresql:// URL")
        _require(self.pool >= 1, "OPTIONS (pool = n) needs n >= 1")
        _require((self.batch_query is None) == (self.batch_key is None), "a batch query needs its key column")

    @property
    def placeholders(self) -> tuple[str, ...]:
        """The columns bound to the query's parameters, in order."""
        return self.params

    @property
    def columns(self) -> tuple[str, ...]:
        """Input columns a query carries."""
        return self.params


@dataclass(frozen=True, slots=True)
class DatabaseTable:
    """A table (or, read only, a query) of a DATABASE: what SOURCE ... FROM DATABASE reads in
    `partitions` ranges of `partition_column`, and SINK ... TO DATABASE writes (`key`: its KEY)."""

    database: str
    url: str                        # as written: `${NAME}` secrets filled by the job's driver
    table: str | None = None
    query: str | None = None
    partition_column: str | None = None
    partitions: int = 1
    key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _require((self.table is None) != (self.query is None), "a database relation is a TABLE or a QUERY")
        _require(self.partitions >= 1, "PARTITION BY col (n) needs n >= 1")


@dataclass(frozen=True, slots=True)
class PythonCall:
    """A user function or class named 'module:name', looked up in `search_path` first."""

    ref: str
    search_path: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        module, sep, name = self.ref.partition(":")
        _require(bool(sep and module and name), f"expected 'module:name', got {self.ref!r}")


@dataclass(frozen=True, slots=True)
class Retry:
    """RETRY n BACKOFF d [EXPONENTIAL]."""

    attempts: int
    backoff_s: float = 0.0
    exponential: bool = False

    def __post_init__(self) -> None:
        _require(self.attempts >= 0, "RETRY must be >= 0")
        _require(self.backoff_s >= 0, "BACKOFF must be >= 0")

    def delay(self, retry_number: int) -> float:
        """Seconds to wait before retry number `retry_number` (1-based)."""
        if self.exponential:
            return self.backoff_s * (2 ** (retry_number - 1))
        return self.backoff_s


@dataclass(frozen=True, slots=True)
class Batch:
    """BATCH n WITHIN d: up to `size` elements per call, sent when full or `within_s` after the
    first one (0: as soon as a call slot is free)."""

    size: int
    within_s: float = 0.0

    def __post_init__(self) -> None:
        _require(self.size >= 1, "BATCH must be >= 1")
        _require(self.within_s >= 0, "WITHIN must be >= 0")


@dataclass(frozen=True, slots=True)
class Cache:
    """CACHE n TTL d: an LRU cache per Python worker."""

    size: int
    ttl_s: float

    def __post_init__(self) -> None:
        _require(self.size >= 1, "CACHE size must be >= 1")
        _require(self.ttl_s > 0, "CACHE TTL must be > 0")


@dataclass(frozen=True, slots=True)
class Rate:
    """RATE n PER SECOND | MINUTE [, m TOKENS PER MINUTE] for the whole job, in the unit written
    (`calls` per `per`); `share` is this task's part of it (until the job-wide limiter of the
    answer store holds it whole)."""

    calls: float
    per: str = "SECOND"                      # SECOND | MINUTE
    share: float = 1.0
    tokens_per_minute: float | None = None   # MODEL and EMBEDDING: tokens of prompts and answers

    def __post_init__(self) -> None:
        _require(self.calls > 0, "RATE must be > 0")
        _require(self.per in ("SECOND", "MINUTE"), f"RATE is PER SECOND or PER MINUTE, not {self.per!r}")
        _require(0 < self.share <= 1, "RATE share must be in (0, 1]")
        _require(self.tokens_per_minute is None or self.tokens_per_minute > 0, "TOKENS PER MINUTE must be > 0")

    @property
    def per_second(self) -> float:
        """Requests per second the whole job may make."""
        return self.calls / 60.0 if self.per == "MINUTE" else self.calls

    @property
    def task_tokens_per_second(self) -> float | None:
        """Tokens per second one task may spend (None: no token limit)."""
        return None if self.tokens_per_minute is None else self.tokens_per_minute * self.share / 60.0

    @property
    def task_rate(self) -> float:
        """Requests per second one task may make."""
        return self.per_second * self.share


@dataclass(frozen=True, slots=True)
class Ceiling:
    """ON ... DEAD LETTER 'path' UP TO n% | n ROWS: the most dead letters an operator may write in
    one run; above it the run ends with exit code 5 (runtime/spark/ceiling.py). Without UP TO the
    ceiling is DEFAULT_CEILING."""

    percent: float | None = None
    rows: int | None = None

    def __post_init__(self) -> None:
        _require((self.percent is None) != (self.rows is None), "a ceiling is a percentage or a number of rows")
        _require(self.percent is None or 0 <= self.percent <= 100, "UP TO n% needs 0 <= n <= 100")
        _require(self.rows is None or self.rows >= 0, "UP TO n ROWS needs n >= 0")

    def allows(self, letters: int, elements: int) -> bool:
        """True when `letters` dead letters of `elements` elements are within the ceiling."""
        if self.rows is not None:
            return letters <= self.rows
        assert self.percent is not None
        return elements == 0 or letters * 100 <= self.percent * elements

    def __str__(self) -> str:
        return f"UP TO {self.rows} ROWS" if self.rows is not None else f"UP TO {self.percent:g}%"


#: the ceiling of a dead-letter path without UP TO: a run that dead-lettered more than half of an
#: operator's elements (every one, say) did not do what the pipeline says
DEFAULT_CEILING = Ceiling(percent=50.0)


@dataclass(frozen=True, slots=True)
class Outage:
    """ON OUTAGE PAUSE d | FAIL: what an operator does once `threshold` calls in a row failed
    for the service (connection refused or reset, 5xx, timeout); CONTINUE is no Outage at all."""

    action: str                     # "PAUSE" | "FAIL"
    pause_s: float = 0.0            # PAUSE d: how long to probe before failing
    threshold: int = 10

    def __post_init__(self) -> None:
        _require(self.action in ("PAUSE", "FAIL"), f"unknown ON OUTAGE action {self.action!r}")
        _require(self.action != "PAUSE" or self.pause_s > 0, "ON OUTAGE PAUSE needs a duration > 0")
        _require(self.threshold >= 1, "an outage needs at least one failed call")


@dataclass(frozen=True, slots=True)
class Store:
    """STORE [TTL d]: answers kept in the pipeline's answer store (`location`: a file path or
    `redis://host:port/db`), shared by every task and run. `run` names this run (set by the
    driver when the job starts): BUDGET counts per run."""

    location: str
    ttl_s: float | None = None
    run: str = ""

    def __post_init__(self) -> None:
        _require(bool(self.location), "STORE needs a location")
        _require(self.ttl_s is None or self.ttl_s > 0, "STORE TTL must be > 0")


@dataclass(frozen=True, slots=True)
class Budget:
    """BUDGET n CALLS | n TOKENS | n USD: the most one operator spends in one run (USD: at its PRICE)."""

    amount: int | float
    unit: str = "CALLS"
    stop_task: bool = False   # set by the driver in STREAMING: a task that left rows unanswered fails

    def __post_init__(self) -> None:
        _require(self.unit in ("CALLS", "TOKENS", "USD"), f"BUDGET counts CALLS, TOKENS or USD, not {self.unit!r}")
        _require(self.amount > 0 if self.unit == "USD" else self.amount >= 1,
                 "BUDGET must be > 0" if self.unit == "USD" else "BUDGET must be >= 1")


#: TIER: the provider's tier an ENRICH's MODEL or EMBEDDING requests are answered in.
TIERS = ("STANDARD", "FLEX", "BATCH")


@dataclass(frozen=True, slots=True)
class Price:
    """PRICE n PER CALL | n PER MILLION INPUT TOKENS [, m PER MILLION OUTPUT TOKENS]: what a call
    of the operator's own TIER costs, in USD (limits/money.py adds it up)."""

    per_call: float = 0.0
    input_per_million: float = 0.0
    output_per_million: float = 0.0

    def __post_init__(self) -> None:
        _require(min(self.per_call, self.input_per_million, self.output_per_million) >= 0, "PRICE must be >= 0")
        _require(bool(self.per_call) != bool(self.input_per_million or self.output_per_million),
                 "PRICE is per call or per million tokens")

    def cost(self, calls: int, prompt_tokens: int, completion_tokens: int) -> float:
        """USD of `calls` calls that spent these tokens."""
        return (calls * self.per_call + prompt_tokens * self.input_per_million / 1e6
                + completion_tokens * self.output_per_million / 1e6)


@dataclass(frozen=True, slots=True)
class Enrich:
    """ENRICH: call an external function per row, append its RETURNS columns."""

    name: str                       # the STREAM name, used in metrics and error messages
    line: int                       # DSL line of the statement
    call: HttpCall | PythonCall | ModelCall | EmbeddingCall | SqlCall
    returns: tuple[Column, ...]
    key_columns: tuple[str, ...]    # columns that identify an element in error messages
    mode: Mode = Mode.ORDERED
    order_by: tuple[str, ...] = ()  # ORDERED BY: input order per value of these columns only
    capacity: int = 100
    adaptive: bool = False          # CAPACITY n ADAPTIVE: the in-flight limit moves in 1..n (AIMD)
    timeout_s: float = 30.0
    retry: Retry | None = None
    cache: Cache | None = None
    rate: Rate | None = None
    batch: Batch | None = None
    on_miss: Outcome = Outcome.NULL
    on_timeout: Outcome = Outcome.FAIL
    on_error: Outcome = Outcome.FAIL
    # RETURNS (col TYPE PATH 'jmespath'): (column, path) for the columns read from elsewhere
    paths: tuple[tuple[str, str], ...] = ()
    outage: Outage | None = None    # ON OUTAGE PAUSE d | FAIL (None: CONTINUE)
    # the values of the call's `${NAME}` secrets: never written by the compiler (it writes
    # `${NAME}`); attached by the job's driver at run time (runtime/secrets.py)
    secrets: Secrets | None = None
    store: Store | None = None      # STORE: answers shared by every task and run
    budget: Budget | None = None    # BUDGET: needs STORE
    tier: str = "STANDARD"          # TIER STANDARD | FLEX | BATCH (MODEL, EMBEDDING)
    price: Price | None = None      # PRICE: what a call of `tier` costs
    batch_failure: str = "BATCH"    # ON BATCH FAILURE ONLINE: a line a batch could not answer is sent online
    ceiling: Ceiling | None = None  # DEAD LETTER 'path' UP TO ...: None is DEFAULT_CEILING
    # calls a task judges before refused credentials or a service never answered stop the run:
    # set by the job's driver from the tasks that run at once (core/refusals.py)
    judged_calls: int = 10
    # PROVENANCE AS col: the struct column (schema/provenance.py) each output row gets
    provenance: str | None = None

    def __post_init__(self) -> None:
        _require(self.budget is None or self.store is not None, "BUDGET needs STORE (a rerun would pay again)")
        _require(self.tier in TIERS, f"TIER is one of {', '.join(TIERS)}, not {self.tier!r}")
        _require(self.tier == "STANDARD" or isinstance(self.call, (ModelCall, EmbeddingCall)),
                 f"TIER {self.tier} needs MODEL or EMBEDDING")
        _require(self.tier != "BATCH" or self.store is not None, "TIER BATCH needs STORE")
        _require(self.batch_failure in ("BATCH", "ONLINE"), "ON BATCH FAILURE is BATCH or ONLINE")
        _require(self.budget is None or self.budget.unit != "USD" or self.price is not None, "BUDGET n USD needs PRICE")
        _require(self.capacity >= 1, "CAPACITY must be >= 1")
        _require(not self.order_by or self.mode is Mode.ORDERED, "ORDERED BY needs mode ORDERED")
        _require(not self.adaptive or self.capacity >= 2, "CAPACITY n ADAPTIVE needs n >= 2")
        _require(self.timeout_s > 0, "TIMEOUT must be > 0")
        _require(self.on_timeout is not Outcome.RETRY, "ON TIMEOUT RETRY is not a policy; use RETRY n")
        _require(self.on_error is not Outcome.RETRY, "ON ERROR RETRY is not a policy; use RETRY n")
        if self.batch is not None and isinstance(self.call, HttpCall):
            _require(self.call.method == "POST", "BATCH needs HTTP POST (one request carries many rows)")
            _require(not self.call.placeholders, "BATCH needs a URL without placeholders (one URL for many rows)")
        _require(self.batch is None or not isinstance(self.call, SqlCall) or self.call.batch_query is not None,
                 "BATCH needs a query that can be batched (column = {col})")
        _require(self.batch is None or not isinstance(self.call, ModelCall),
                 "BATCH does not apply to MODEL (a chat completion answers one prompt)")
        _require(self.rate is None or self.rate.tokens_per_minute is None
                 or isinstance(self.call, (ModelCall, EmbeddingCall)),
                 "TOKENS PER MINUTE needs MODEL or EMBEDDING (answers that report their tokens)")

    @property
    def dead_letters(self) -> bool:
        """True when some outcome routes elements to the dead-letter output."""
        return Outcome.DEAD_LETTER in (self.on_miss, self.on_timeout, self.on_error)

    @property
    def secret_names(self) -> tuple[str, ...]:
        """The `${NAME}` secrets the call's templates name (any kind of call), and its answer
        store's location (`redis://:${PASSWORD}@host`)."""
        return secret_names((self.call, self.store.location if self.store is not None else ""))


@dataclass(frozen=True, slots=True)
class Process:
    """PROCESS: a user function over each row with read-only broadcast states."""

    name: str
    line: int
    call: PythonCall
    returns: tuple[Column, ...]
    states: tuple[str, ...] = ()    # broadcast state names, passed as arguments in this order
    key_columns: tuple[str, ...] = ()


#: EXPECT's actions, the mildest first: a row that breaks several constraints gets the strictest.
ACTIONS: tuple[str, ...] = ("WARN", "DROP", "QUARANTINE", "FAIL")


@dataclass(frozen=True, slots=True)
class Constraint:
    """One CONSTRAINT of an EXPECT: its condition as Spark SQL and, when it runs inside a chain,
    as a Python expression over the row `r` (compiler/plan/expect_python.py) and, when it has one,
    as pyarrow.compute calls over a batch's columns `b` (compiler/plan/expect_arrow.py); the
    action, and QUARANTINE's folder."""

    name: str
    line: int
    sql: str
    action: str = "WARN"
    path: str | None = None
    python: str | None = None
    arrow: str | None = None

    def __post_init__(self) -> None:
        _require(self.action in ACTIONS, f"unknown action {self.action!r}")
        _require((self.action == "QUARANTINE") == (self.path is not None), "QUARANTINE needs a path, and only it")


@dataclass(frozen=True, slots=True)
class Expect:
    """EXPECT ON name: the constraints every row of relation `name` is judged by (in a chain, an
    operator after the one that makes `name`; elsewhere, Spark expressions)."""

    name: str
    line: int
    constraints: tuple[Constraint, ...]

    def __post_init__(self) -> None:
        _require(bool(self.constraints), "an EXPECT needs a constraint")

    @property
    def quarantines(self) -> bool:
        return any(c.action == "QUARANTINE" for c in self.constraints)

    @property
    def key(self) -> str:
        """How its figures are keyed among the operators' (metrics, live progress)."""
        return f"EXPECT {self.name}"


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event-time watermark generated inside a chain: max(column) - delay, every interval."""

    column: str
    delay_s: float
    interval_s: float = 0.2


@dataclass(frozen=True, slots=True)
class JoinedAnswers:
    """The chain's head ENRICH has stored answers found before it runs (runtime/spark/stored_join.py):
    a row that has one passes the operator by with its RETURNS columns; the others go through it
    with their `columns`. Either Spark joined them (a row whose `flag` column is true carries its
    RETURNS columns already), or, with `table` (an Arrow file of the answers, on the machine of
    every Python worker), the chain's pass looks each row's request columns `keys` up in it
    (core/stored_answers.py)."""

    flag: str | None
    columns: tuple[str, ...]
    ordered: bool
    table: str | None = None
    keys: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Chain:
    """Operators that run in one Python pass (one mapInArrow) over the rows."""

    name: str
    operators: tuple[Enrich | Process | Expect, ...]
    input_columns: tuple[Column, ...]
    output_columns: tuple[Column, ...]
    watermark: Watermark | None = None
    batch_size: int = 1024          # rows per output Arrow batch
    joined: JoinedAnswers | None = None

    def __post_init__(self) -> None:
        _require(len(self.operators) >= 1, "a chain needs at least one operator")

    @property
    def dead_letters(self) -> bool:
        """True when the chain's output carries the dead-letter column."""
        return any(isinstance(op, Enrich) and op.dead_letters or isinstance(op, Expect) and op.quarantines
                   for op in self.operators)
