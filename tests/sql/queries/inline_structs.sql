SELECT inline(items) FROM events
