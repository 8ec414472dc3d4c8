"""mkbsim: an event-sourced research instrument for agent memory in GPU-kernel optimization.

Kept import-light: the verifier and catalogue run on bare GPU machines, and `mkbsim --help`
must start fast. Heavy parts are imported from their subpackages.
"""

__version__ = "0.1.0"
