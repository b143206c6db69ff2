"""Sub-commands of ``hpcval``: one module each, with ``register(subparsers)``."""
