-- expect: E0212 2:53 GROUP_BY_AGGREGATE
SELECT kind, sum(qty) AS total FROM events GROUP BY total
