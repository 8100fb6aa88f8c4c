# The fixture's old build script (a classic setuptools extension); `opgen build` replaces it.
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

setup(
    name="extension_cpp",
    packages=["extension_cpp"],
    ext_modules=[CppExtension("extension_cpp._C", ["extension_cpp/csrc/muladd.cpp"])],
    cmdclass={"build_ext": BuildExtension},
)
