SELECT kind, count(*) FROM from events GROUP BY kind
