"""hpcval: cluster validation with Spack-pinned stacks and ReFrame checks.

The package holds everything that is logic rather than declaration: output
parsers, reference loading and validation, report rendering and the ``hpcval``
command line. ReFrame checks in ``reframe-checks/`` and site configurations in
``site-configs/`` stay thin and import it.
"""

__version__ = "0.1.0"
