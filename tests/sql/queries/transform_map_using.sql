FROM events
MAP kind, qty, CAST(qty / 10 AS INT) USING 'cat' AS (k, q, tens)
