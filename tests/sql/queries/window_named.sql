SELECT id, sum(qty) OVER w AS s, max(qty) OVER w AS m FROM events WINDOW w AS (PARTITION BY kind ORDER BY ts)
