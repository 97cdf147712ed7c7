"""Build the Cython extensions of rayreact.core; a compiler is required (see rayreact.core.IMPLEMENTATION)."""
import sys

if not sys.platform.startswith("linux"):
    # The runtime is built on Linux itself: futex doorbells, userfaultfd, /proc, PR_SET_PDEATHSIG.
    sys.exit(f"rayreact runs on Linux only (this is {sys.platform}); on other systems use Ray itself.")

import numpy  # noqa: E402
from Cython.Build import cythonize  # noqa: E402
from setuptools import Extension, setup  # noqa: E402

extensions = [
    Extension("rayreact.core.channel", ["rayreact/core/channel.pyx"], include_dirs=["rayreact/core"],
              extra_compile_args=["-O3"]),
    Extension("rayreact.core.classify", ["rayreact/core/classify.pyx"], extra_compile_args=["-O3"]),
    Extension("rayreact.core.reactor", ["rayreact/core/reactor.pyx"], include_dirs=["rayreact/core"],
              extra_compile_args=["-O3"]),
    Extension("rayreact.core.arena", ["rayreact/core/arena.pyx"], include_dirs=[numpy.get_include()],
              define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_22_API_VERSION")], extra_compile_args=["-O3"]),
]

setup(ext_modules=cythonize(extensions, language_level=3, compiler_directives={"boundscheck": False, "wraparound": False}))
