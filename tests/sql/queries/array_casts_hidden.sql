SELECT array_append(CAST(NULL AS ARRAY<STRING>), kind), array_prepend(CAST(array() AS ARRAY<STRING>), kind),
  CAST(NULL AS ARRAY<INT>), size(CAST(NULL AS ARRAY<INT>))
FROM events
