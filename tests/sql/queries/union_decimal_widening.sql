SELECT amount FROM events UNION ALL SELECT credit FROM users
