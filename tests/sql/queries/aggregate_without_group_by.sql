SELECT count(*) AS n, max(qty) + 1 AS m, percentile_cont(0.5) WITHIN GROUP (ORDER BY price) AS p
FROM events
HAVING count(*) > 1
