SELECT transform(scores, x -> x * 2) AS doubled, filter(tags, t -> t <> 'x') AS kept,
  exists(scores, s -> s > 3) AS any_big FROM events
