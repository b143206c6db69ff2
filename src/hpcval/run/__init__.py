"""One validation run: running ReFrame, its processes and lock, and storing and
judging what it produced."""
