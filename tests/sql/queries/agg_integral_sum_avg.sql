SELECT sum(qty), sum(small), sum(tiny), avg(qty), sum(ratio), avg(id) FROM events
