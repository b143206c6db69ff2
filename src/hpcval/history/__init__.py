"""What was measured before: ReFrame's run reports read back, the results store,
references contracts, comparisons of two runs and the statistics that judge a
change (``judging/``)."""
