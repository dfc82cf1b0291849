SELECT k, total FROM (
  SELECT kind AS k, sum(qty) AS total FROM events GROUP BY kind) t
WHERE total > 10
