"""BatchApi's list paging (runtime/batches/api.py) against the local OpenAI-compatible service:
one loop serves `find` (batches) and `find_file` (files), asking each next page `after` the last
id while the provider says `has_more`, and never more than the pages it is given."""
from __future__ import annotations

import asyncio

from dslc.runtime.batches.api import BatchApi
from dslc.runtime.config import ModelCall
from dslc.testing.openai_service import OpenAIService, serve_in_thread


def _listed(base_url: str, names: list[str], limit: str, pages: int) -> tuple[list[str], list[str]]:
    """Upload `names`, then list them `limit` a page over at most `pages` pages: (uploaded ids, listed ids)."""
    async def run() -> tuple[list[str], list[str]]:
        async with BatchApi(ModelCall("gpt-test", base_url, "{x}")) as api:
            uploaded = [(await api.upload(name, b'{"a": 1}\n'))["id"] for name in names]
            listed = [item["id"] async for item in api._listed("/files", {"purpose": "batch", "limit": limit},
                                                                  pages)]
            return uploaded, listed
    return asyncio.run(run())


def test_the_list_is_followed_page_after_page_up_to_the_pages_given():
    with serve_in_thread(OpenAIService()) as running:
        uploaded, listed = _listed(running.base_url, ["a.jsonl", "b.jsonl", "c.jsonl"], limit="1", pages=5)
        assert sorted(listed) == sorted(uploaded) and len(listed) == 3     # each page once, none repeated
    with serve_in_thread(OpenAIService()) as running:
        uploaded, listed = _listed(running.base_url, ["a.jsonl", "b.jsonl", "c.jsonl"], limit="1", pages=2)
        assert len(listed) == 2 and set(listed) < set(uploaded)


def test_a_file_is_found_by_name_and_size_and_a_batch_by_its_file_or_mark():
    async def run(base_url: str) -> list:
        async with BatchApi(ModelCall("gpt-test", base_url, "{x}")) as api:
            data = b'{"custom_id": "k1", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
            file = await api.upload("dslc-r1.jsonl", data)
            await api.upload("dslc-r2.jsonl", data)
            batch = await api.create(file["id"], "/v1/chat/completions", {"dslc_batch": "r1"})
            return [(await api.find_file("dslc-r1.jsonl", len(data)))["id"] == file["id"],
                    await api.find_file("dslc-r1.jsonl", len(data) + 1),
                    (await api.find(file["id"], "other"))["id"] == batch["id"],
                    (await api.find("file-none", "r1"))["id"] == batch["id"],
                    await api.find("file-none", "r9")]
    with serve_in_thread(OpenAIService(batch_delay_s=0.1)) as running:
        assert asyncio.run(run(running.base_url)) == [True, None, True, True, None]
