-- expect: E0201 3:41
SELECT name,
  (SELECT max(amount) FROM events WHERE x.user_id = users.user_id) AS top
FROM users
