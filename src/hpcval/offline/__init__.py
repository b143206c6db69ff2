"""An offline site from one folder (``hpcval offline bundle``, docs/spack.md section 1):

- :mod:`hpcval.offline.wheels`: hpcval's Python stack as wheels for a target platform;
- :mod:`hpcval.offline.debs`: the Debian packages of ``make system-deps`` and their closure;
- :mod:`hpcval.offline.bundle`: the folder, its manifests and its ``SHA256SUMS``.
"""
