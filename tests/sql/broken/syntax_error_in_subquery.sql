-- expect: E0206 3:59
SELECT name FROM users
WHERE user_id IN (SELECT user_id FROM events WHERE kind = )
