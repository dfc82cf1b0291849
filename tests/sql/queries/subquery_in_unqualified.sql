SELECT user_id, name FROM users
WHERE user_id IN (SELECT user_id FROM events WHERE kind = 'buy')
