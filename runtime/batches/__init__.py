"""TIER BATCH: a model operator's requests answered by the provider's Batch API before the job's
pass (`runner`), through its Files and Batches endpoints (`api`), one JSONL line per request key
(`lines`); what it keeps in the answer store is store/ledger.py's."""
