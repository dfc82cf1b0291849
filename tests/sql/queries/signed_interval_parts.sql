SELECT ts + INTERVAL 1 DAY -2 HOURS 30 MINUTES AS later, corr(DISTINCT price, qty) AS c,
  any_value(kind, false) AS k, first_value(note, true) AS n
FROM events GROUP BY ts
