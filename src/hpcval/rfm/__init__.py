"""ReFrame-facing helpers: the check base mixin and site-config detection.

Check files import from here; nothing here is a check itself.
"""

from hpcval.rfm.base import HpcvalTest, last_level_cache_bytes

__all__ = ["HpcvalTest", "last_level_cache_bytes"]
