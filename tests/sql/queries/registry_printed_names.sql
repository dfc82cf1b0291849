SELECT sinh(price), signum(qty), exp(ratio), log(price), log(2, price), mask(note), mask(note, 'Q'),
  make_ym_interval(2), lpad(note, 5), regexp_instr(note, 'a+')
FROM events
