-- expect: E0212 2:17
SELECT user_id, substr(name) FROM users
