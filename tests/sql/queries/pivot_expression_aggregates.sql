SELECT * FROM (SELECT kind, flag, qty FROM events)
PIVOT (
  ceil(sum(qty)), avg(qty) + 1 AS a
  FOR flag IN (true AS yes, false AS no)
)
