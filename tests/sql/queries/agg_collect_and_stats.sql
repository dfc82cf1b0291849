SELECT collect_list(kind), collect_set(qty), stddev(price), variance(qty), first(kind), last(ts) FROM events
