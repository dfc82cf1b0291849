SELECT ts + INTERVAL 1 DAY AS tomorrow, day + INTERVAL '2' MONTH AS later, ts - INTERVAL '1:30' HOUR TO MINUTE AS earlier,
  day - INTERVAL 3 DAY AS d3 FROM events
