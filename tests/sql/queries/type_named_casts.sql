SELECT double(qty), bigint(note), smallint('7'), tinyint(qty), binary(note), date('2024-01-02'),
  bigint('9') / bigint('3')
FROM events
