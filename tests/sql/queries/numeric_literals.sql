SELECT 1 AS i, 10000000000 AS l, 1.25 AS d, 1.5e3 AS dbl, 2L AS bl, 1S AS s, 1Y AS t, 3.0BD AS bd FROM events
