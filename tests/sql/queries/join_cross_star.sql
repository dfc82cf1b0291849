SELECT u.*, r.r_name FROM users u CROSS JOIN region r
