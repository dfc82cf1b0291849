SELECT qty > 2, kind IS NULL, note LIKE 'a%', qty BETWEEN 1 AND 3, kind IN ('a', 'b'), NOT flag FROM events
