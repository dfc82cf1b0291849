"""Adapters that wrap any call (`delegating.DelegatingCall`): BATCH's gathering, record and replay."""
