"""What the TUI computes from the rows it reads through the read model (``mkbsim.lab``): claim lineage,
replay timelines, filter previews, and the store watcher. No SQL and no event payload parsing here;
nothing here imports Textual.
"""
