-- expect: E0212 2:8
SELECT signup * 2 FROM users
