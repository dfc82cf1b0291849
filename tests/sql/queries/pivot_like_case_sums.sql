SELECT user_id, sum(CASE WHEN kind = 'buy' THEN amount END) AS buys, sum(IF(kind = 'sell', qty, 0)) AS sells FROM events GROUP BY user_id
