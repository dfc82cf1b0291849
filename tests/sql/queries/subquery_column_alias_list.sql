SELECT a, b FROM (SELECT kind, qty FROM events) AS t(a, b)
