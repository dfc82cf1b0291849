SELECT day - signup AS between_days, datediff(day, signup) AS dd, ts - CAST(day AS TIMESTAMP) AS since FROM events JOIN users USING (user_id)
