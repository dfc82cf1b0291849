SELECT qty + 1, price * 2, -qty, amount / 2, id % 3 FROM events
