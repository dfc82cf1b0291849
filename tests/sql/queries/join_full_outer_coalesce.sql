SELECT coalesce(u.user_id, e.user_id), e.id FROM users u FULL OUTER JOIN events e ON u.user_id = e.user_id
