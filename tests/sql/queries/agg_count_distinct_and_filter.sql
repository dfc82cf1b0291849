SELECT count(DISTINCT kind), count(*) FILTER (WHERE flag) AS flagged, approx_count_distinct(user_id) FROM events
