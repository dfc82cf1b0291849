SELECT posexplode(tags) FROM events
