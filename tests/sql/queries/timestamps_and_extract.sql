SELECT extract(YEAR FROM ts) AS y, hour(ts) AS h, current_date() AS today, to_timestamp(note) AS t, last_day(day) AS ld FROM events
