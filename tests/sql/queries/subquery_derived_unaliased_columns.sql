SELECT * FROM (SELECT kind, count(*), max(price) FROM events GROUP BY kind) AS agg
