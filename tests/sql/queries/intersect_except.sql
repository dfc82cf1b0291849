(SELECT user_id FROM users INTERSECT SELECT user_id FROM events) EXCEPT SELECT user_id FROM users WHERE visits = 0
