SELECT id, it.sku, it.n * 2 AS twice FROM events LATERAL VIEW OUTER explode(items) x AS it
