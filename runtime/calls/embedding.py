"""ENRICH WITH EMBEDDING: `POST {AT}/embeddings` of an OpenAI-compatible API, the element's INPUT
text in, its vector out as the one RETURNS column. With BATCH one request carries the inputs of
the batch, and each answer item is matched to its input by `index` (not by position)."""
from __future__ import annotations

import math
from typing import Any

from dslc.runtime.config import EmbeddingCall, Enrich
from dslc.runtime.core.operator import Row
from dslc.runtime.limits.tokens import text_tokens
from dslc.runtime.schema import provenance

from .base import CallError, UnsendableRequest, answer_error
from .openai_api import OpenAICompatibleCall


class EmbeddingEnrichCall(OpenAICompatibleCall):
    """One vector per element, or one request per batch."""

    def __init__(self, config: Enrich) -> None:
        assert isinstance(config.call, EmbeddingCall)
        super().__init__(config)
        self.call = config.call
        self.column = config.returns[0].name
        self.notes = provenance.notes(config)
        self.dimension: int | None = None     # the size of this operator's first vector: all must share it

    endpoint = "/embeddings"

    def request(self, row: Row) -> tuple[dict[str, Any], int]:
        """The request body for one row and its tokens (UnsendableRequest: a null placeholder):
        what a provider batch's line carries."""
        text = self.fill(self.call.input, row)
        return self._body([text]), text_tokens(text)

    def answer(self, answer: dict[str, Any]) -> Any:
        """The one vector of a one-input answer as the row's result (CallError: its error)."""
        return {self.column: self.vectors(answer, 1)[0]}

    async def __call__(self, row: Row) -> Any:
        text = self.fill(self.call.input, row)
        vectors, answer = await self._embed([text])
        return self._noted({self.column: vectors[0]}, answer, text)

    def _noted(self, result: dict[str, Any], answer: dict[str, Any], text: str) -> dict[str, Any]:
        """PROVENANCE: the model as answered and the input as sent (hashed)."""
        if self.notes:
            result[provenance.NOTE] = provenance.note(model=answer.get("model"),
                                                      system_fingerprint=answer.get("system_fingerprint"),
                                                      prompt_sha256=provenance.sha256(text))
        return result

    async def call_batch(self, rows: list[Row]) -> list[Any]:
        """BATCH: the fillable inputs in one request; a row whose input cannot be filled gets its
        own error as its item (the batching wrapper fails that element alone)."""
        items: list[Any] = [None] * len(rows)
        texts: list[str] = []
        positions: list[int] = []
        for i, row in enumerate(rows):
            try:
                texts.append(self.fill(self.call.input, row))
                positions.append(i)
            except UnsendableRequest as exc:
                items[i] = exc
        if texts:
            vectors, answer = await self._embed(texts, each=True)
            for i, text, vector in zip(positions, texts, vectors):
                items[i] = vector if isinstance(vector, CallError) else self._noted({self.column: vector}, answer, text)
        return items

    def _body(self, texts: list[str]) -> dict[str, Any]:
        return {"model": self.call.model, "input": texts[0] if len(texts) == 1 else texts, "encoding_format": "float"}

    async def _embed(self, texts: list[str], each: bool = False) -> tuple[list[Any], dict[str, Any]]:
        """The vectors of `texts`, in order, and the answer they came in (`each`: see `vectors`)."""
        answer = await self.post(self.endpoint, self._body(texts), sum(text_tokens(t) for t in texts), completes=False)
        return self.vectors(answer, len(texts), each), answer

    def vectors(self, answer: dict[str, Any], count: int, each: bool = False) -> list[Any]:
        """The vectors of an embeddings answer for `count` inputs, matched by `index`; CallError
        when the answer does not have exactly one vector of numbers per input. A vector holding
        NaN or an infinity, or of another size than the operator's first one (a model changed
        mid-run, a gateway routing to two models: vectors that cannot be compared), is an error
        too: raised, or with `each` (BATCH) that input's item, the others' vectors kept."""
        data = answer.get("data")
        if not isinstance(data, list):
            raise answer_error("the embeddings answer has no data list")
        by_index: dict[int, list[float]] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not 0 <= index < count or index in by_index:
                raise CallError(f"the embeddings answer has an item with index {index!r} for {count} inputs")
            if not isinstance(vector, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                       for v in vector):
                raise answer_error(f"the embedding at index {index} is not a list of numbers")
            by_index[index] = [float(v) for v in vector]
        if len(by_index) != count:
            raise CallError(f"the embeddings answer has {len(by_index)} vectors for {count} inputs")
        out: list[Any] = []
        for index in range(count):
            error = self._unusable(by_index[index], index)
            if error is not None and not each:
                raise error
            out.append(error or by_index[index])
        return out

    def _unusable(self, vector: list[float], index: int) -> CallError | None:
        """Why a vector cannot be a row's (NaN, another size than the operator's first), or None."""
        if not all(math.isfinite(v) for v in vector):
            return answer_error(f"the embedding at index {index} holds NaN or an infinity")
        if self.dimension is None:
            self.dimension = len(vector)
        elif len(vector) != self.dimension:
            return answer_error(f"the embedding at index {index} has {len(vector)} dimensions where this "
                                f"operator's earlier vectors have {self.dimension}")
        return None
