-- expect: E0212 2:11
SELECT IF(visits > 1, signup, credit) FROM users
