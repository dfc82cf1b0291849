SELECT CASE WHEN qty > 2 THEN 'many' ELSE 'few' END AS size, if(flag, amount, 0) AS a, coalesce(note, kind) AS c,
  nvl(price, 0) AS p, nullif(qty, 0) AS nz, CASE kind WHEN 'buy' THEN 1 WHEN 'sell' THEN 2.5 END AS code FROM events
