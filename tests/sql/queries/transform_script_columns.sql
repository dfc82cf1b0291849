SELECT a, b + 1 FROM (
  SELECT TRANSFORM(kind, qty) USING 'cat' AS (a STRING, b INT) FROM events
) t
