SELECT user_id, name, kind FROM events JOIN users USING (user_id)
