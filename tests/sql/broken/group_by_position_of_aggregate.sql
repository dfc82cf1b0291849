-- expect: E0212 2:49 GROUP_BY_POS_AGGREGATE
SELECT kind, count(*) AS n FROM events GROUP BY 2
