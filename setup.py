"""Build of the compiled extensions (:mod:`ntpcore.core.native`): ``ntpcore.att._steps``,
the attention experiments' descent steps (:mod:`ntpcore.att.compiled`);
``ntpcore.geo.train._adamw``, the numpy UFM trainer's AdamW step; and
``ntpcore.geo.models._fused``, the transformer's attention, RMSNorm and SwiGLU gate on the prefix trie
(:mod:`ntpcore.geo.models.fused`); everything else is in ``pyproject.toml``.

All three are optional: without a C compiler the install goes on and the code runs its numpy
(or torch) path instead (the same results to rounding).  ``-ffp-contract=off``: no fused
multiply-add but the ones the source writes, so that every CPU computes the same bits;
``-fno-math-errno``: ``sqrt`` without ``errno`` (vectorised; the values are the same).
"""

from setuptools import Extension, setup

FLAGS = ["-O3", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno"]

setup(
    ext_modules=[
        Extension(
            name,
            [source],
            depends=depends,
            extra_compile_args=FLAGS,
            libraries=["m"],
            optional=True,
        )
        for name, source, depends in [
            ("ntpcore.att._steps", "ntpcore/att/_steps.c", []),
            ("ntpcore.geo.train._adamw", "ntpcore/geo/train/_adamw.c", []),
            (
                "ntpcore.geo.models._fused",
                "ntpcore/geo/models/_fused.c",
                ["ntpcore/geo/models/_fused_kernels.h"],  # included once per float type
            ),
        ]
    ]
)
