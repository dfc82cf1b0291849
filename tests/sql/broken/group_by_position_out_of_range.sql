-- expect: E0212 2:52 GROUP_BY_POS_OUT_OF_RANGE
SELECT kind, count(*) AS n FROM events GROUP BY 1, 3
