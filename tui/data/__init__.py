"""What the TUI reads from the store: SQL over the events table and the projections' tables.

Every function takes the calling thread's own sqlite3 connection (connections are never shared
between threads) and reads only a bounded page or an aggregate, so a screen stays responsive on
stores of millions of events. Nothing here imports Textual.
"""
