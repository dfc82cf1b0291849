SELECT window(ts, '1 minute') AS w, kind, count(*) AS n FROM events GROUP BY window(ts, '1 minute'), kind
