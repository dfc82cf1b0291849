SELECT id, explode(scores) FROM events
