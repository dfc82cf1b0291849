SELECT * EXCEPT (tags, scores, attrs, address, items, raw) FROM events
