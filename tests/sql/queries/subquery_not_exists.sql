SELECT name, signup FROM users
WHERE NOT EXISTS (SELECT * FROM events WHERE events.user_id = users.user_id)
