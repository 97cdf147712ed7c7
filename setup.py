"""Build the Cython extensions of rayreact.core; a compiler is required (see rayreact.core.IMPLEMENTATION)."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

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
