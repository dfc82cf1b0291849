SELECT tiny + small AS a, small * qty AS b, qty + id AS c, tiny / qty AS d, qty div 2 AS e, qty % small AS f, ratio + qty AS g, -small AS h FROM events
