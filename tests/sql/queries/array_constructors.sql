SELECT array(1, 2, 3) AS a, array(qty, small) AS b, sequence(1, qty) AS s, flatten(array(scores, scores)) AS f FROM events
