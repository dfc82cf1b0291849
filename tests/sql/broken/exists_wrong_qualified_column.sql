-- expect: E0204 4:34
SELECT u.name FROM users u
WHERE EXISTS (
  SELECT 1 FROM events e WHERE e.user_idd = u.user_id)
