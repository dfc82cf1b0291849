SELECT sum(amount), avg(amount), sum(credit), avg(credit), max(amount) FROM events, users
