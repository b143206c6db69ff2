"""What a person reads: the terminal summary and HTML report, trends and their
page, SVG plots, exports and the problem-size tables."""
