-- expect: E0204 2:14
SELECT kind, total FROM (
  SELECT kind, sum(qty) AS n FROM events GROUP BY kind) t
