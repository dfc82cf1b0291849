WITH buys AS (SELECT user_id, amount FROM events WHERE kind = 'buy'),
  per_user AS (SELECT user_id, sum(amount) AS spent FROM buys GROUP BY user_id)
SELECT u.name, p.spent FROM per_user p JOIN users u ON p.user_id = u.user_id
