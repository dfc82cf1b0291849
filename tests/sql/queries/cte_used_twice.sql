WITH k AS (SELECT kind, count(*) AS n FROM events GROUP BY kind)
SELECT a.kind, a.n, b.n AS n2 FROM k a JOIN k b ON a.kind = b.kind
