"""The CUDA parts of build.ninja (Note [CUDA build modes], Note [pybind link]) for given toolchains.

Nothing here runs nvcc: the toolkits are described, not probed, so these run
everywhere. tests/test_cuda_link.py builds the same things for real.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import opgen.build.ninja as ninja_module
import opgen.build.toolchain.cuda as cuda_module
from opgen.build.ninja import CudaMode, Toolchain, plan_build
from opgen.build.run import run_build
from opgen.build.toolchain.cuda import Arch, CudaMissing, CudaProblem, CudaToolkit, Nvcc
from opgen.build.toolchain.modes import cuda_mode
from opgen.errors import OpgenError
from opgen.project.load import load_project

from _cpp_support import opgen

TORCH = Path(torch.__file__).parent
CUDART = Path("/opt/cuda-13.0/lib64")
TOOLKIT = CudaToolkit(
    nvcc=Nvcc(
        Path("/opt/cuda-13.0/bin/nvcc"), Path("/opt/cuda-13.0"), (13, 0), frozenset({75, 80, 90})
    ),
    found_by="CUDA_HOME",
    cudart_dir=CUDART,
    cudart_link="-lcudart",
    archs=(Arch(80), Arch(90, ptx=True)),
    arch_source="TORCH_CUDA_ARCH_LIST",
)
CPU_TORCH = Toolchain(
    cxx="/opt/gcc-12/bin/g++",
    ninja="ninja",
    torch_dir=TORCH,
    torch_cuda=None,
    cxx11_abi=True,
    cuda=TOOLKIT,
)
CUDA_TORCH = replace(CPU_TORCH, torch_cuda="13.0")


@pytest.fixture(scope="module")
def stable(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plan_stable")
    opgen("new", "mylib::foo", "--backend", "cpp", "--devices", "cpu,cuda", cwd=root)
    return root


@pytest.fixture(scope="module")
def classic_pybind(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("plan_classic")
    (root / "opgen.toml").write_text(
        '[project]\nnamespace = "mylib"\npackage = "mylib"\n\n[options]\nbackend = "cpp"\ncpp_target = "classic"\n'
    )
    opgen("new", "mylib::foo", "--devices", "cpu,cuda", cwd=root)
    spec = root / "ops" / "foo.toml"
    spec.write_text(spec.read_text().replace('backend = "cpp"', 'backend = "cpp"\npybind = true'))
    opgen("generate", cwd=root)
    return root


def _var(text: str, name: str) -> str:
    return re.search(rf"^{name} = (.*)$", text, re.M).group(1)


def _edge(text: str, output: str) -> str:
    """The `build OUTPUT: ...` line and its indented bindings."""
    match = re.search(rf"^build {re.escape(output)}:.*\n(?:  .*\n)*", text, re.M)
    assert match, f"no edge for {output} in:\n{text}"
    return match.group(0)


def test_nvcc_gets_ccbin_with_the_build_s_cxx(stable):
    text = plan_build(load_project(stable), CPU_TORCH).ninja_text
    assert _var(text, "cxx") == "/opt/gcc-12/bin/g++"
    assert "-ccbin /opt/gcc-12/bin/g++" in _var(text, "nvcc_flags")


def test_library_links_cudart_by_rpath_with_no_undefined(stable):
    plan = plan_build(load_project(stable), CPU_TORCH)
    ldflags = _var(plan.ninja_text, "ldflags")
    assert "-Wl,--no-undefined" in ldflags
    assert f"-L{CUDART} -lcudart -Wl,-rpath,{CUDART}" in ldflags
    assert "-ltorch_cuda" not in ldflags and "-lc10_cuda" not in ldflags  # a CPU torch has neither
    assert plan.cuda_mode is CudaMode.LINK
    assert "build/obj/csrc/cuda/foo.cu.o" in _edge(plan.ninja_text, "mylib/_C.abi3.so")


def test_archs_reach_nvcc_and_the_link_log(stable):
    text = plan_build(load_project(stable), CPU_TORCH).ninja_text
    flags = _var(text, "nvcc_flags")
    assert "-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 " in flags
    assert "-gencode=arch=compute_90,code=compute_90" in flags
    assert "note = $ (CUDA 13.0: sm_80 sm_90+PTX)" in _edge(text, "mylib/_C.abi3.so")
    assert "description = LINK $out$note" in text


@pytest.fixture
def cpu_libtorch(tmp_path: Path) -> Path:
    """A torch folder whose libtorch exports no CUDA function, as a CPU torch's: the installed
    torch's headers, and a libtorch.so with one non-CUDA shim function (whatever torch runs)."""
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++")
    if compiler is None:
        pytest.fail("no C compiler to build a stand-in libtorch.so")
    (tmp_path / "include").symlink_to(TORCH / "include")
    (tmp_path / "lib").mkdir()
    source = tmp_path / "libtorch.c"
    source.write_text("int aoti_torch_get_numel(void) { return 0; }\n")
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-x",
            "c",
            str(source),
            "-o",
            str(tmp_path / "lib" / "libtorch.so"),
        ],
        check=True,
        timeout=120,
    )
    return tmp_path


def test_cpu_torch_weakens_the_cuda_shim_functions_it_lacks(stable, cpu_libtorch):
    """Note [CUDA on a CPU torch]."""
    text = plan_build(load_project(stable), replace(CPU_TORCH, torch_dir=cpu_libtorch)).ninja_text
    assert (
        "command = $nvcc -MD -MF $out.d $nvcc_flags -c $in -o $out && $objcopy $weaken $out" in text
    )
    weakened = _var(text, "weaken").split()
    assert (
        "aoti_torch_get_current_cuda_stream" in weakened and "torch_c10_cuda_check_msg" in weakened
    )
    assert (
        "aoti_torch_get_numel" not in weakened
    )  # a CPU torch exports it: stays a strong reference


def test_cuda_torch_links_torch_s_cuda_libraries(stable, classic_pybind):
    stable_text = plan_build(load_project(stable), CUDA_TORCH).ninja_text
    assert "-ltorch_cuda -L" in _var(stable_text, "ldflags") and "-lc10_cuda" not in stable_text
    assert "objcopy" not in stable_text  # the shim's CUDA functions are real there
    classic = _var(plan_build(load_project(classic_pybind), CUDA_TORCH).ninja_text, "ldflags")
    assert "-lc10_cuda -ltorch_cuda" in classic


def test_pybind_module_links_the_cuda_kernels_and_is_checked(classic_pybind):
    """Note [pybind link]: the module's own link has every kernel object and libcudart."""
    text = plan_build(load_project(classic_pybind), CUDA_TORCH).ninja_text
    module = next(
        line.split(":")[0][len("build ") :]
        for line in text.splitlines()
        if line.startswith("build mylib/_pybind")
    )
    edge = _edge(text, module)
    assert "build/obj/csrc/cuda/foo.cu.o" in edge and "build/obj/csrc/cpu/foo.cpp.o" in edge
    assert f"-lcudart -Wl,-rpath,{CUDART}" in edge
    check = f"build/link_check/{Path(module).name}"
    assert f"| {check}" in edge.splitlines()[0]
    check_edge = _edge(text, check)
    assert "build/obj/csrc/cuda/foo.cu.o" in check_edge
    assert re.search(r"-Wl,--no-undefined \S*libpython3\.\d+\.so", check_edge)
    assert "-DUSE_CUDA" in _var(text, "cflags")  # pybind.cpp then binds foo_cuda


def test_classic_on_a_cpu_torch_is_checked_or_skipped(classic_pybind):
    project = load_project(classic_pybind)
    skipped = plan_build(project, CPU_TORCH)
    assert skipped.cuda_mode is CudaMode.SKIP and "nvcc" not in _edge(
        skipped.ninja_text, "check_cuda"
    )
    assert any(
        "needs a CUDA torch (libc10_cuda)" in n and "--check-cuda" in n for n in skipped.notes
    )
    checked = plan_build(project, CPU_TORCH, check_cuda=True)
    assert checked.cuda_mode is CudaMode.CHECK
    assert "build build/cuda_check/csrc/cuda/foo.cu.o: nvcc csrc/cuda/foo.cu" in checked.ninja_text
    assert "foo.cu.o" not in _edge(checked.ninja_text, "mylib/_C.so")


# ---- Note [CUDA build modes] -------------------------------------------------

_MISSING = CudaMissing(
    "no CUDA toolkit found (CUDA_HOME and CUDA_PATH are unset, no nvcc on PATH)", "install it"
)


def _mode(**kw):
    args = dict(sources=2, stable=True, torch_cuda=None, toolkit=None, problem=None)
    return cuda_mode(**(args | kw))


def test_cuda_torch_without_a_toolkit_is_an_error():
    with pytest.raises(OpgenError) as info:
        _mode(torch_cuda="12.8", problem=_MISSING)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.message.startswith(
        "torch was built with CUDA 12.8 and the project has 2 .cu file(s), but no CUDA toolkit found"
    )
    assert "--cpu-only builds only the CPU kernels" in diagnostic.hint


def test_cuda_torch_with_a_broken_toolkit_is_an_error():
    with pytest.raises(OpgenError, match="nvcc is CUDA 13.0"):
        _mode(torch_cuda="12.8", problem=CudaProblem("nvcc is CUDA 13.0", "use 12"))


def test_cpu_only_is_reported():
    decision = _mode(torch_cuda="12.8", problem=_MISSING, cpu_only=True)
    assert decision.mode is CudaMode.SKIP
    assert decision.note.startswith("CPU-only build (--cpu-only): 2 .cu file(s) not built")
    assert "'CUDA' backend" in decision.note


def test_cpu_torch_without_a_toolkit_skips_unless_asked_to_check():
    decision = _mode(problem=_MISSING)
    assert decision.mode is CudaMode.SKIP and decision.note.startswith(
        "CUDA skipped: no CUDA toolkit found"
    )
    with pytest.raises(OpgenError, match="--check-cuda needs nvcc"):
        _mode(problem=_MISSING, check_cuda=True)


def test_cpu_torch_with_an_unusable_toolkit_is_an_error():
    with pytest.raises(OpgenError, match="cannot build 2 .cu file.s.: no libcudart"):
        _mode(problem=CudaProblem("no libcudart.so in the CUDA toolkit at /x"))


def test_contradicting_flags():
    with pytest.raises(OpgenError, match="--cpu-only and --check-cuda contradict"):
        _mode(cpu_only=True, check_cuda=True)


def test_no_cuda_sources_need_no_toolkit():
    assert _mode(sources=0, torch_cuda="12.8", problem=_MISSING).mode is CudaMode.NONE


# ---- a faked CUDA torch without nvcc, end to end ------------------------------


@pytest.fixture
def cuda_torch_without_nvcc(monkeypatch, tmp_path):
    """torch says CUDA 12.8; PATH has g++ and ninja but no nvcc; no CUDA folder anywhere."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("g++", "ninja"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    for variable in ("CUDA_HOME", "CUDA_PATH", "CXX"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(cuda_module, "CONVENTIONAL_HOME", tmp_path / "no-cuda")
    # torch's own guess (cpp_extension.CUDA_HOME: a real CUDA torch finds /usr/local/cuda)
    monkeypatch.setattr(ninja_module, "_torch_cuda_home", lambda: None)


def test_cuda_torch_without_nvcc_fails_the_build(cuda_torch_without_nvcc, stable):
    with pytest.raises(OpgenError) as info:
        run_build(load_project(stable))
    message = info.value.diagnostics[0].message
    assert "torch was built with CUDA 12.8" in message and "no nvcc on PATH" in message
    assert "--cpu-only" in info.value.diagnostics[0].hint
    assert not (stable / "mylib" / "_C.abi3.so").exists()


def test_cuda_torch_with_the_wrong_nvcc_fails_the_build(monkeypatch, stable):
    if shutil.which("nvcc") is None:
        pytest.skip("needs an nvcc")
    monkeypatch.setattr(torch.version, "cuda", "11.8")
    with pytest.raises(OpgenError) as info:
        run_build(load_project(stable))
    assert "torch loads libcudart.so.11" in info.value.diagnostics[0].message
    assert "use the nvcc of a CUDA 11.x toolkit" in info.value.diagnostics[0].hint


def test_cuda_torch_cpu_only_builds_the_cpu_library(monkeypatch, tmp_path):
    """`--cpu-only` looks for no toolkit at all, so nvcc on PATH does not matter."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    root = tmp_path / "cpu_only"
    root.mkdir()
    opgen("new", "mylib::foo", "--backend", "cpp", "--devices", "cpu,cuda", cwd=root)
    result = run_build(load_project(root), cpu_only=True)
    assert result.ok, result.summary
    assert result.plan.cuda_mode is CudaMode.SKIP
    assert any(
        n.startswith("CPU-only build (--cpu-only): 1 .cu file(s) not built") for n in result.notes
    )
    assert (
        "nvcc" not in result.plan.ninja_text.split("rule nvcc")[1].split("rule link")[1]
    )  # no CUDA edge
    assert (root / "mylib" / "_C.abi3.so").is_file()
