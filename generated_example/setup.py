"""Builds an installable wheel of example_ops: `pip install --no-build-isolation .`

This file is yours: opgen created it once and only merges its own changes
into it. For development, `opgen build` is faster (one ninja build, the same
flags). CUDA sources are compiled when torch was built with CUDA.
"""

import glob
import os

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

PACKAGE = "example_ops"
STABLE = True
WITH_CUDA = torch.version.cuda is not None and os.environ.get("OPGEN_NO_CUDA") != "1"


def sources(device: str, suffix: str) -> list[str]:
    return sorted(glob.glob(f"csrc/{device}/*{suffix}"))


def extensions():
    files = ["csrc/registration.cpp"]
    files += ["csrc/registration_cpu.cpp"] + sources("cpu", ".cpp")
    cxx = ["-O3", "-fopenmp", "-std=c++17", "-DNDEBUG"]
    nvcc = ["-O3", "-DNDEBUG", "-std=c++17"]
    macros = []
    if STABLE:
        macros += [("TORCH_TARGET_VERSION", "0x020a000000000000"), ("Py_LIMITED_API", "0x03090000")]
    extension = CppExtension
    if WITH_CUDA:
        files += ["csrc/registration_cuda.cpp"] + sources("cuda", ".cu")
        macros.append(("USE_CUDA", None))
        extension = CUDAExtension
    built = [
        extension(
            f"{PACKAGE}._C",
            files,
            define_macros=macros,
            extra_compile_args={"cxx": cxx, "nvcc": nvcc},
            extra_link_args=["-fopenmp"],
            py_limited_api=STABLE,
        )
    ]
    return built


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    ext_modules=extensions(),
    cmdclass={"build_ext": BuildExtension},
    options={"bdist_wheel": {"py_limited_api": "cp39"}} if STABLE else {},
    install_requires=["torch"],
)
