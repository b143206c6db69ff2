"""STREAM memory bandwidth (Copy, Scale, Add, Triad), McCalpin's reference code.

"The Performance of Remote Memory Access over InfiniBand" (Iwaida, Suzuki,
Midorikawa) compares STREAM Triad on local and remote memory; this is the
local-memory figure of a node. STREAM's arrays must be at least four times
the last-level caches: ``stream_sized_check`` compiles ``stream.c`` with
arrays sized from the detected caches; ``stream_check`` runs the installed
``stream_c.exe``/``stream_f.exe`` (Spack ``stream``) and fails when its
arrays are too small for this node. Each skips with the reason where STREAM
is absent. STREAM prints only the best of its iterations, so each runs
``samples`` times in one job (5 by default): a figure is the median of the
runs' best rates. How STREAM is found, sized and run: :mod:`hpcval.rfm.stream`."""

import reframe as rfm

from hpcval.rfm.stream import StreamBase, StreamBuildBase


@rfm.simple_test
class stream_check(StreamBase):
    descr = "STREAM (installed stream_c.exe / stream_f.exe): memory bandwidth of a node"
    valid_systems = ["*"]
    valid_prog_environs = ["+stream", "plain"]
    tags = {"memory", "stream"}


@rfm.simple_test
class stream_sized_check(StreamBuildBase):
    descr = "STREAM (stream.c built with arrays >= 4x the last-level caches)"
    valid_systems = ["*"]
    valid_prog_environs = ["plain"]
    tags = {"memory", "stream"}
