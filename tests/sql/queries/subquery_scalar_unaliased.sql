SELECT name, (SELECT count(*) FROM events) FROM users
