-- expect: E0204 3:35
SELECT id,
  row_number() OVER (PARTITION BY knd ORDER BY ts) AS rn
FROM events
