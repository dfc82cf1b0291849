-- expect: E0212 3:23 MISSING_AGGREGATION
SELECT u.country, count(*) AS n
FROM (SELECT country, name, count(*) AS visits FROM users GROUP BY country) u
GROUP BY u.country
