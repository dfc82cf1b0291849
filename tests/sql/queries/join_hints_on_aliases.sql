-- Join hints name relations by their aliases; the names in a hint are not relations the query reads
SELECT /*+ BROADCAST(n), SHUFFLE_HASH(o) */ c.c_name, n.n_name, o.o_totalprice
FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey JOIN nation n ON n.n_nationkey = c.c_nationkey
