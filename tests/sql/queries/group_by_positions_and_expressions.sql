SELECT kind AS k, upper(kind), qty + user_id AS s, any_value(note) AS note, count(*) AS n
FROM events
GROUP BY 1, user_id + qty
ORDER BY 5 DESC, 1
