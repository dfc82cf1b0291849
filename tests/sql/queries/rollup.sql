SELECT kind, user_id, count(*) AS n, grouping_id() FROM events GROUP BY ROLLUP (kind, user_id)
