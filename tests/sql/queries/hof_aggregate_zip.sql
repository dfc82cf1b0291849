SELECT aggregate(scores, 0, (acc, x) -> acc + x) AS total,
  zip_with(scores, scores, (a, b) -> a + b) AS pairs FROM events
