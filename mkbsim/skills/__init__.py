"""Skills science (issue 10): filter tests, multi-hop chains, claim linking across skills, labelers,
and the skills report. Store-facing; the pure rules live in ``mkbsim.metrics`` and ``mkbsim.claims``."""
