SELECT id FROM events
WHERE user_id NOT IN (SELECT user_id FROM users WHERE visits > 10)
