"""The dependency graph of a trace (:mod:`.build`) and its compiled passes (:mod:`.core`):
what had to happen before what, so the critical path and what-if replays
(:mod:`nsysmoe.measure.critical_path`) can say what bounds the step."""
