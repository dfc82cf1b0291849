-- expect: E0204 4:12
SELECT kind, sum(qty) AS total FROM events
GROUP BY kind
HAVING sum(qtty) > 3
