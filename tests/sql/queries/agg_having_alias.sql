SELECT kind, sum(qty) AS total FROM events GROUP BY kind HAVING total > 3
