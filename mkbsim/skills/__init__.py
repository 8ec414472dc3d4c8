"""Skills science (DESIGN §7, §9): filter-test and chain reports, labelers and their quality, the skills
report. They compute over rows read through the read model (``mkbsim.lab``); the pure rules live in
``mkbsim.metrics`` and ``mkbsim.claims``."""
