SELECT name, (SELECT max(amount) FROM events WHERE events.user_id = users.user_id) AS top
FROM users
