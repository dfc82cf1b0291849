SELECT items[0].sku AS sku, items.price AS prices FROM events
