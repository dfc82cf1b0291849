"""`dslc run FILE --lineage DEST`: OpenLineage run events of the run, sent through the
openlineage-python client's transports.

The job, its input datasets (sources, broadcast sources, and each service an ENRICH calls, its
URL as written with `${NAME}` secrets by name and credentials masked), its output datasets (the
sinks), their schema facets and, on each output, the column-lineage facet the compiler derived
(compiler/plan/lineage.py) are known before Spark starts: START says them, RUNNING follows each
micro-batch of a STREAMING query, COMPLETE or FAIL ends the run (FAIL with the exit code's
meaning). DEST is a file (`.json` / `.jsonl`: one event a line), a folder (an existing one or a
path ending in `/`: one file per event) or the base URL of an OpenLineage HTTP API.
"""
from __future__ import annotations

import datetime as dt
import json
import sys
import urllib.parse
import uuid
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    error_message_run,
    job_type_job,
    processing_engine_run,
    schema_dataset,
)
from openlineage.client.serde import Serde

from dslc.compiler.plan import logical as plan
from dslc.compiler.plan.lineage import Columns, sinks_of
from dslc.runtime.secrets import mask_url, scrub
from dslc.runtime.spark.lineage import transport_for

PRODUCER = "https://github.com/dslc/dslc"
NAMESPACE = "dslc"
_FILES = ("JSON", "CSV", "PARQUET", "TEXT", "ORC", "AVRO", "DELTA")


def _host(url: str) -> tuple[str, str]:
    """(namespace, name) of a URL as OpenLineage names a service: scheme://host[:port] and the path,
    with user:password and credential-like query values masked."""
    parts = urllib.parse.urlsplit(mask_url(url))
    netloc = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{netloc}", parts.path + (f"?{parts.query}" if parts.query else "")


def _database(db: plan.DatabaseTable) -> tuple[str, str]:
    parts = urllib.parse.urlsplit(mask_url(db.url))
    netloc = parts.netloc.rpartition("@")[2]
    return f"postgres://{netloc}", f"{parts.path.strip('/')}.{db.table or 'query'}"


def _dataset_name(connector: str, path: str | None, database: plan.DatabaseTable | None,
                  folder: Path) -> tuple[str, str]:
    if database is not None:
        return _database(database)
    if connector.upper() in _FILES and path:
        return "file", str((folder / path).resolve())
    if connector.upper() == "TABLE" and path:
        return "spark_catalog", path
    return connector.lower(), path or connector.lower()


def _schema(columns: Iterable[plan.Column]) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type) for c in columns])


class RunLineage:
    """The events of one run of a plan, and the client that sends them."""

    START = RunState.START

    def __init__(self, p: plan.Plan, dest: str, folder: Path, streaming: bool) -> None:
        self.plan = p
        self.folder = folder
        self.streaming = streaming
        self.run_id = str(uuid.uuid4())
        self.client = OpenLineageClient(transport=transport_for(dest))
        self.names: dict[str, tuple[str, str]] = {}      # source or state -> its dataset
        self.inputs = self._inputs()
        self.outputs = self._outputs()

    def _inputs(self) -> list[InputDataset]:
        out: list[InputDataset] = []
        for node in self.plan.nodes:
            if isinstance(node, plan.Source):
                namespace, name = _dataset_name(node.connector, node.path, node.database, self.folder)
                self.names[node.name] = (namespace, name)
                out.append(InputDataset(namespace, name, facets={"schema": _schema(node.schema)}))
            elif isinstance(node, plan.Enrich) and not isinstance(node.call, plan.PythonCall):
                namespace, name = self._service(node)
                out.append(InputDataset(namespace, name, facets={"schema": _schema(node.returns)}))
        return out

    def _service(self, node: plan.Enrich) -> tuple[str, str]:
        """The service an ENRICH calls, as a dataset (a database query: its database)."""
        call = node.call
        if isinstance(call, plan.HttpCall):
            return _host(call.url)
        if isinstance(call, plan.SqlCall):
            parts = urllib.parse.urlsplit(mask_url(call.url))
            return f"postgres://{parts.netloc.rpartition('@')[2]}", f"{parts.path.strip('/')}.{node.name}"
        path = "/chat/completions" if isinstance(call, plan.ModelCall) else "/embeddings"
        namespace, base = _host(call.base_url)
        return namespace, f"{base}{path}#{call.model}"

    def _outputs(self) -> list[OutputDataset]:
        out: list[OutputDataset] = []
        for item in sinks_of(self.plan):
            sink = item.sink
            namespace, name = _dataset_name(sink.connector, sink.path, sink.database, self.folder)
            columns = self.plan.node(sink.input).schema
            facets: dict[str, Any] = {"schema": _schema(columns),
                                      "columnLineage": self._column_lineage(item.columns)}
            out.append(OutputDataset(namespace, name, facets=facets))
        return out

    def _column_lineage(self, columns: Columns) -> column_lineage_dataset.ColumnLineageDatasetFacet:
        fields = {}
        for column, origins in columns.items():
            inputs = [column_lineage_dataset.InputField(*self.names[source], field=field)
                      for source, field in sorted(origins) if source in self.names]
            fields[column] = column_lineage_dataset.Fields(inputFields=inputs)
        return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields)

    def event(self, state: RunState, error: str | None = None) -> RunEvent:
        """One event of this run (the datasets in every one, as OpenLineage consumers merge them)."""
        run_facets: dict[str, Any] = {"processing_engine": processing_engine_run.ProcessingEngineRunFacet(
            version=version("dslc"), name="dslc", openlineageAdapterVersion=version("openlineage-python"))}
        if error is not None:
            run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=error, programmingLanguage="PYTHON")
        job_facets = {"jobType": job_type_job.JobTypeJobFacet(
            processingType="STREAMING" if self.streaming else "BATCH", integration="DSLC", jobType="JOB")}
        return RunEvent(eventType=state, eventTime=dt.datetime.now(dt.timezone.utc).isoformat(),
                        run=Run(runId=self.run_id, facets=run_facets),
                        job=Job(namespace=NAMESPACE, name=self.plan.settings.name, facets=job_facets),
                        inputs=self.inputs, outputs=self.outputs, producer=PRODUCER)

    def emit(self, state: RunState, error: str | None = None) -> None:
        """Send one event; one that cannot be sent is said, and the run goes on."""
        try:
            self.client.emit(self.event(state, error))
        except Exception as exc:  # noqa: BLE001 - lineage never stops a run
            print(f"dslc: warning: the {state.value} lineage event was not sent: {scrub(str(exc))}", file=sys.stderr)

    def handoff(self, path: Path, dest: str) -> None:
        """Write what the job's driver needs to send RUNNING events (runtime/spark/lineage.py)."""
        path.write_text(json.dumps({"dest": dest, "event": Serde.to_dict(self.event(RunState.START))}),
                        encoding="utf-8")



def ended(lineage: RunLineage, code: int, meaning: str) -> None:
    """COMPLETE for a run that ended well (done, or stopped by Ctrl-C / SIGTERM), else FAIL."""
    from dslc.runtime import exit_codes

    if code in (exit_codes.DONE, exit_codes.INTERRUPTED, exit_codes.TERMINATED):
        lineage.emit(RunState.COMPLETE)
    else:
        lineage.emit(RunState.FAIL, f"exit code {code}: {meaning}")
