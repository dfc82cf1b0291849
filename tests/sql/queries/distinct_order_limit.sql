SELECT DISTINCT kind, user_id FROM events ORDER BY kind LIMIT 5
