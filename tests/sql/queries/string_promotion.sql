SELECT qty + '2', amount + '1', ratio / '4', tiny * '3', pmod('7', small),
  IF(flag, tiny, qty), CASE WHEN flag THEN tiny ELSE note END, coalesce(price, note)
FROM events
