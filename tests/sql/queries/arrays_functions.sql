SELECT size(tags), array_contains(tags, 'a') AS has_a, element_at(scores, 1) AS first_score,
  sort_array(scores) AS sorted, array_distinct(tags) AS uniq, tags[0] AS t0, slice(scores, 1, 2) AS head FROM events
