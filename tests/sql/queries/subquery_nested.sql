SELECT name FROM users WHERE user_id IN (
  SELECT user_id FROM events WHERE qty > (SELECT avg(qty) FROM events))
