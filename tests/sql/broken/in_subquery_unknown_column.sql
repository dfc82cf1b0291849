-- expect: E0204 4:52
-- an IN subquery's column is checked against the subquery's own table
SELECT name FROM users
WHERE user_id IN (SELECT user_id FROM events WHERE kindd = 'buy')
