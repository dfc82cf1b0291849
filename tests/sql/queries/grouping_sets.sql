SELECT kind, user_id, sum(qty) AS total, grouping(kind) FROM events
GROUP BY GROUPING SETS ((kind, user_id), (kind), ())
