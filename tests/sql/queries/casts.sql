SELECT CAST(qty AS STRING), CAST(amount AS DECIMAL(20, 4)) AS wide, CAST(note AS INT) AS n, qty::BIGINT AS big,
  CAST(ts AS DATE) AS d, try_cast(note AS DOUBLE) AS maybe FROM events
