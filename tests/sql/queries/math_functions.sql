SELECT sqrt(price) AS r, pow(qty, 2) AS p, exp(ratio) AS e, ln(price) AS l, greatest(qty, small, tiny) AS g, least(price, ratio) AS le,
  mod(qty, 3) AS m, pmod(id, 7) AS pm, sign(price) AS s FROM events
