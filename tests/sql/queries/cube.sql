SELECT kind, flag, avg(amount) AS a FROM events GROUP BY CUBE (kind, flag)
