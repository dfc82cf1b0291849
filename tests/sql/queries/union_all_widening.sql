SELECT qty FROM events UNION ALL SELECT visits FROM users
