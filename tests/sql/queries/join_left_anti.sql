SELECT name FROM users LEFT ANTI JOIN events ON users.user_id = events.user_id
