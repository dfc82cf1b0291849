SELECT map_keys(attrs) AS ks, map_values(attrs) AS vs, attrs['color'] AS color,
  map('a', qty) AS m, element_at(attrs, 'k') AS k FROM events
