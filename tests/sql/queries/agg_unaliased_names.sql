SELECT kind, count(*), count(id), sum(qty), avg(price), min(ts), max(day) FROM events GROUP BY kind
