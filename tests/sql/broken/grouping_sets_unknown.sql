-- expect: E0204 3:34
SELECT kind, sum(qty) AS total FROM events
GROUP BY GROUPING SETS ((kind), (user_idd), ())
