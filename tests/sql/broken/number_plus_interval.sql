-- expect: E0212 2:8
SELECT visits + INTERVAL 2 DAYS FROM users
