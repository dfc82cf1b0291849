SELECT address.city, window(ts, '10 minutes'), u.country, count(*) AS n
FROM events e JOIN users u ON e.user_id = u.user_id
GROUP BY address.city, window(ts, '10 minutes'), u.country
