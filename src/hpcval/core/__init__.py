"""The ground floor: errors and exit codes, YAML and file writing, the judged
figures and measured series, run ids and the checkout's paths. Imports nothing
of hpcval above it."""
