SELECT user_id, name, country, signup, credit, visits FROM users WHERE visits > 3
UNION ALL TABLE users
