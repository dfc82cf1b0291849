SELECT amount * 1.5 AS a, amount + 1 AS b, amount * qty AS c, amount / 100 AS d, amount * price AS e FROM events
