"""Build of the one compiled extension, ``ntpcore.att._steps`` (the attention experiments'
descent steps, :mod:`ntpcore.att.compiled`); everything else is in ``pyproject.toml``.

The extension is optional: without a C compiler the install goes on and
:mod:`ntpcore.att.descent` runs its numpy loop (the same results to rounding).
``-ffp-contract=off``: no fused multiply-adds, so that every CPU computes the same bits.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ntpcore.att._steps",
            ["ntpcore/att/_steps.c"],
            extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
            libraries=["m"],
            optional=True,
        )
    ]
)
