from setuptools import setup

# Metadata lives in pyproject.toml; this file only hooks in the cffi build of
# the native layer (native/build_native.py), which needs no MPI to compile.
setup(cffi_modules=["native/build_native.py:ffibuilder"])
