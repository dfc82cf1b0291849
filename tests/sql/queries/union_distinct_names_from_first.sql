SELECT kind AS label, small FROM events UNION SELECT name, CAST(visits AS TINYINT) FROM users
