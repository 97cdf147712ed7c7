"""Build the Cython extensions of rayreact.core; a compiler is required (see rayreact.core.IMPLEMENTATION)."""
from Cython.Build import cythonize
from setuptools import Extension, setup

extensions = [
    Extension("rayreact.core.channel", ["rayreact/core/channel.pyx"], include_dirs=["rayreact/core"],
              extra_compile_args=["-O3"]),
    Extension("rayreact.core.reactor", ["rayreact/core/reactor.pyx"], include_dirs=["rayreact/core"],
              extra_compile_args=["-O3"]),
]

setup(ext_modules=cythonize(extensions, language_level=3, compiler_directives={"boundscheck": False, "wraparound": False}))
