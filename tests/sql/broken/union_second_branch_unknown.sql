-- expect: E0204 4:8
SELECT user_id FROM users
UNION ALL
SELECT usr_id FROM events
