SELECT amount + amount AS a, amount - credit AS b, amount * credit AS c, amount / credit AS d, amount % 3 AS e FROM events, users
