-- expect: E0212 2:14 MISSING_AGGREGATION
SELECT kind, user_id, count(*) AS n FROM events GROUP BY kind
