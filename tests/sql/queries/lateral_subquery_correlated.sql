SELECT * FROM users u, LATERAL (SELECT count(*) AS n, max(e.price) FROM events e WHERE e.user_id = u.user_id) AS s(n, top)
