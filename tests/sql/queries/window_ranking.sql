SELECT id, row_number() OVER (PARTITION BY kind ORDER BY ts) AS rn,
  rank() OVER (ORDER BY price DESC), dense_rank() OVER (ORDER BY qty) AS dr FROM events
