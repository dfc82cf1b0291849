SELECT id, lag(price, 1) OVER (ORDER BY ts) AS prev, lead(kind) OVER (ORDER BY ts) AS nxt,
  ntile(4) OVER (ORDER BY ts) AS quartile, percent_rank() OVER (ORDER BY ts) AS pr, cume_dist() OVER (ORDER BY ts) AS cd FROM events
