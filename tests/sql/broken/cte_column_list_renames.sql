-- expect: E0204 3:11
WITH t(x, y) AS (SELECT id, price FROM events)
SELECT x, price FROM t
