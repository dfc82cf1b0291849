"""What decides around an ENRICH element's attempts, one small object each (Beam's Repeater and
Throttler, Flink's retry strategy): RETRY (`retry`), admission by RATE (`rate`) and ADAPTIVE
(`adaptive`), the ON OUTAGE hold (`outage`), BUDGET (`budget`), refused credentials (`refusal`)
and the push-back a service signals (`pushback`). `base` has the hooks they share;
core/resolution.py runs an element's attempts as a loop over them."""
