SELECT id, explode(tags) AS tag FROM events
