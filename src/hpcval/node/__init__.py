"""The node: its topology, problem sizing, physical limits, the host and GPU
audits with their expectations, MPI ABIs, per-message CPU cost and tuning."""
