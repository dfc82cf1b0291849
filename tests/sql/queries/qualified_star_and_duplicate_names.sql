SELECT e.id, u.user_id, e.user_id FROM events e JOIN users u ON e.user_id = u.user_id
