SELECT * FROM users LEFT SEMI JOIN events ON users.user_id = events.user_id
