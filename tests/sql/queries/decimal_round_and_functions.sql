SELECT round(amount, 1) AS r1, round(amount) AS r0, floor(amount) AS f, ceil(credit) AS c, abs(amount) AS ab, bround(price, 2) AS br FROM events, users
