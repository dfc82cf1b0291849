-- expect: E0201 2:30
SELECT user_id, avg(amount), cout(*) AS n
FROM events GROUP BY user_id
