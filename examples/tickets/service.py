"""The model the tickets example calls: a local OpenAI-compatible service (dslc.testing's) that
labels a ticket by keywords, so the example runs offline and gives the same labels every time.

    POST /v1/chat/completions   structured output {"category", "urgency"} with usage
    POST /v1/embeddings         (not used here)

It holds 1200 requests and 400000 tokens a minute (429 above, as OpenAI does); the pipeline's
RATE keeps under both. Run it alone with `python service.py [port]`; examples/run.py starts it.
"""
from __future__ import annotations

import sys

from dslc.testing.openai_service import keyword_labeller, main

# the first rule whose word the ticket (subject and body) contains gives the value
LABELS = keyword_labeller({
    "category": [("down", "outage"), ("outage", "outage"), ("error 500", "outage"), ("not loading", "outage"),
                 ("invoice", "billing"), ("charged", "billing"), ("refund", "billing"), ("payment", "billing"),
                 ("password", "account"), ("login", "account"), ("locked", "account"), ("2fa", "account"),
                 ("", "other")],
    "urgency": [("down", 5), ("outage", 5), ("error 500", 4), ("charged twice", 4), ("locked", 4),
                ("not loading", 4), ("refund", 3), ("password", 3), ("invoice", 2), ("", 1)],
})

if __name__ == "__main__":
    port = sys.argv[1] if len(sys.argv) > 1 else "8765"
    main(["--port", port, "--rpm", "1200", "--tpm", "400000", "--latency-ms", "20"], labeller=LABELS)
