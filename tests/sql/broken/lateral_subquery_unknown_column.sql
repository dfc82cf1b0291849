-- expect: E0204 3:38
SELECT * FROM users, LATERAL (SELECT visits * 2 AS twice),
  LATERAL (SELECT twice + 1 AS more, thrice)
