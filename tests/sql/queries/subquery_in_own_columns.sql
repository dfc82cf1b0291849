SELECT name FROM users
WHERE country IN (SELECT kind FROM events WHERE qty > 2)
