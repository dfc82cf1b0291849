WITH t(x, y) AS (SELECT id, price FROM events)
SELECT x, y * 2 FROM t
