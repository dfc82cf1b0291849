SELECT * FROM (SELECT user_id, sum(qty) AS total FROM events GROUP BY user_id),
  LATERAL (SELECT total * 2 AS doubled),
  LATERAL (SELECT doubled + user_id AS shifted)
