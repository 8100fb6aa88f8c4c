"""Builds an installable wheel of example_ops: `pip install --no-build-isolation .`

This file is yours: opgen created it once and only merges its own changes
into it. For development, `opgen build` is faster (one ninja build, the same
flags). CUDA sources are compiled when torch was built with CUDA. The build
settings of opgen.toml and the specs (`[build]`) are in the fence below.
"""

import glob
import os
import re
import sys

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension, CUDAExtension

PACKAGE = "example_ops"
STABLE = True
WITH_CUDA = torch.version.cuda is not None and os.environ.get("OPGEN_NO_CUDA") != "1"

# opgen: begin build_settings (regenerated from [build] in opgen.toml and the specs; edit the spec, not these lines)
CXX_FLAGS = []
NVCC_FLAGS = []
DEFINES = []
INCLUDE_DIRS = []
LIBRARY_DIRS = []
LIBRARIES = []
SOURCES = []
# opgen: end build_settings


def sources(device: str, suffix: str) -> list[str]:
    return sorted(glob.glob(f"csrc/{device}/*{suffix}"))


def expand(path: str) -> str:
    """A leading $NAME or ${NAME} from the environment, as `opgen build` expands it."""
    found = re.match(r"\$(?:\{(\w+)\}|(\w+))(?=/|$)", path)
    if found is None:
        return path
    name = found.group(1) or found.group(2)
    value = os.environ.get(name, "")
    if not os.path.isabs(value):
        sys.exit(f"setup.py: {path} needs the environment variable {name} set to an absolute path")
    return value + path[found.end() :]


def shell_safe(extensions) -> bool:
    """Whether no argument of `extensions` needs quoting: torch's ninja build joins them unquoted.

    Otherwise the extensions build without ninja, one file at a time, with each
    argument handed to the compiler as it is (no shell).
    """
    plain = re.compile(r"[\w\-+=.,:/@%]*")
    values = []
    for ext in extensions:
        values += ext.sources + ext.include_dirs + ext.library_dirs + ext.libraries
        values += [f"{name}={value}" for name, value in ext.define_macros if value is not None]
        values += [flag for flags in ext.extra_compile_args.values() for flag in flags]
    return all(plain.fullmatch(value) for value in values)


def macro(define: str) -> tuple:
    name, _, value = define.partition("=")
    return (name, value) if "=" in define else (name, None)


def extensions():
    extra = [source for source in SOURCES if not source.endswith(".cu")]
    files = ["csrc/registration.cpp"] + extra
    files += ["csrc/registration_cpu.cpp"] + sources("cpu", ".cpp")
    cxx = ["-O3", "-fopenmp", "-std=c++17", "-DNDEBUG"] + CXX_FLAGS
    nvcc = ["-O3", "-DNDEBUG", "-std=c++17"] + NVCC_FLAGS
    macros = [macro(define) for define in DEFINES]
    include_dirs = [expand(folder) for folder in INCLUDE_DIRS]
    library_dirs = [expand(folder) for folder in LIBRARY_DIRS]
    if STABLE:
        macros += [("TORCH_TARGET_VERSION", "0x020a000000000000"), ("Py_LIMITED_API", "0x03090000")]
    extension = CppExtension
    if WITH_CUDA:
        files += ["csrc/registration_cuda.cpp"] + sources("cuda", ".cu")
        files += [source for source in SOURCES if source.endswith(".cu")]
        macros.append(("USE_CUDA", None))
        extension = CUDAExtension
    built = [
        extension(
            f"{PACKAGE}._C",
            files,
            define_macros=macros,
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=LIBRARIES,
            runtime_library_dirs=[folder for folder in library_dirs if os.path.isabs(folder)],
            extra_compile_args={"cxx": cxx, "nvcc": nvcc},
            extra_link_args=["-fopenmp"],
            py_limited_api=STABLE,
        )
    ]
    return built


EXTENSIONS = extensions()
setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    ext_modules=EXTENSIONS,
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=shell_safe(EXTENSIONS))},
    options={"bdist_wheel": {"py_limited_api": "cp39"}} if STABLE else {},
    install_requires=["torch"],
)
