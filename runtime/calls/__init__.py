"""The kinds of ENRICH call, one module each behind `base.EnrichCall`; `factory.build_call` picks one."""
