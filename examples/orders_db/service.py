"""The orders example's database: a private PostgreSQL on a free port of 127.0.0.1 (Debian's
server, started as dslc's tests start theirs: dslc.testing.postgres), holding

- customers c000..c199 (tier bronze/silver/gold, a risk between 0 and 1; c013 is unknown),
- orders 1..2000 (a customer, an amount, a country),
- risk_limits: one limit per country (FR, DE, BR; US has none).

`python service.py` starts it, fills it, writes its port and password to target/service.env
(the secrets SHOP_PORT and SHOP_PASSWORD of pipeline.flow) and runs until stopped (SIGTERM or
Ctrl-C), then removes it. examples/run.py does all that for you around `dslc run`.
"""
from __future__ import annotations

import signal
import sys
import threading
import zlib
from pathlib import Path

TIERS = ("bronze", "silver", "gold")
COUNTRIES = ("FR", "DE", "BR", "US")
LIMITS = [("fr-large", "FR", 800.0), ("de-large", "DE", 900.0), ("br-large", "BR", 500.0)]


def customers() -> list[tuple]:
    """(customer_id, tier, risk): c000..c199, c013 left out (an unknown customer)."""
    return [(f"c{n:03d}", TIERS[n % 3], round((zlib.crc32(f"c{n:03d}".encode()) % 100) / 100, 2))
            for n in range(200) if n != 13]


def orders(count: int = 2000) -> list[tuple]:
    """(order_no, customer_id, amount, country), deterministic."""
    return [(n, f"c{(n * 7) % 200:03d}", float((zlib.crc32(str(n).encode()) % 100_000) / 100),
             COUNTRIES[n % 4]) for n in range(1, count + 1)]


def fill(db) -> None:
    """The example's tables and rows (the sink's table is created by the job)."""
    db.execute("CREATE TABLE customers (customer_id TEXT PRIMARY KEY, tier TEXT NOT NULL, risk DOUBLE PRECISION)")
    db.execute("CREATE TABLE orders (order_no BIGINT PRIMARY KEY, customer_id TEXT, amount DOUBLE PRECISION, "
               "country TEXT)")
    db.execute("CREATE TABLE risk_limits (rule_id TEXT PRIMARY KEY, country TEXT, max_amount DOUBLE PRECISION)")
    db.copy_rows("customers", ["customer_id", "tier", "risk"], customers())
    db.copy_rows("orders", ["order_no", "customer_id", "amount", "country"], orders())
    db.copy_rows("risk_limits", ["rule_id", "country", "max_amount"], LIMITS)


def start():
    """A started, filled database (call .stop() when done)."""
    from dslc.testing.postgres import LocalPostgres

    db = LocalPostgres(user="shop", database="shop").start()
    try:
        fill(db)
    except BaseException:
        db.stop()
        raise
    return db


def main() -> None:
    db = start()
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    settings = Path(__file__).with_name("target") / "service.env"
    try:
        settings.parent.mkdir(exist_ok=True)
        settings.write_text(f"SHOP_PORT={db.port}\nSHOP_PASSWORD={db.password}\n")
        print(f"orders_db: PostgreSQL on 127.0.0.1:{db.port} (its password in {settings})", file=sys.stderr)
        stopped.wait()
    except KeyboardInterrupt:
        pass
    finally:
        settings.unlink(missing_ok=True)
        db.stop()


if __name__ == "__main__":
    main()
