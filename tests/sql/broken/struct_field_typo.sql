-- expect: E0204 3:11
SELECT id,
  address.cty AS city
FROM events
