SELECT date_add(day, 1) AS d1, add_months(day, 1) AS m1, year(ts), month(day), dayofweek(day) AS dow,
  date_trunc('HOUR', ts) AS hour, to_date(note) AS parsed, date_format(ts, 'yyyy-MM') AS ym, unix_timestamp(ts) AS u FROM events
