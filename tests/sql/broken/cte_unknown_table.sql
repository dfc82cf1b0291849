-- expect: E0201 2:43
WITH buys AS (SELECT user_id, amount FROM eventz WHERE kind = 'buy')
SELECT user_id FROM buys
