SELECT transform_values(attrs, (k, v) -> length(v)) AS lens, map_filter(attrs, (k, v) -> k <> 'a') AS kept FROM events
