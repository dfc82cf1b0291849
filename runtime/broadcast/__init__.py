"""BROADCAST state: the read-write side, read-only views for the data side, snapshots."""
