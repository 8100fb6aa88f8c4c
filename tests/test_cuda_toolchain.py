"""Note [CUDA toolchain] over fake toolkit layouts: CUDA home, libcudart, versions and archs."""

from __future__ import annotations

from pathlib import Path

import pytest
from _fake_cuda import NVCC12_CODES, NVCC13_CODES, calls, fake_toolkit, which_in, wrapper

from opgen.build.toolchain.cuda import (
    Arch,
    CudaMissing,
    CudaProblem,
    Nvcc,
    find_cuda,
    parse_arch_list,
    probe_nvcc,
    select_archs,
)


def _find(env=None, torch_cuda=None, torch_archs=(), torch_home=None, path=(), conventional=None):
    return find_cuda(
        env or {},
        torch_cuda,
        list(torch_archs),
        torch_home,
        which_in(*path),
        conventional or Path("/nonexistent/cuda"),
    )


# ---- CUDA home -------------------------------------------------------------


def test_wrapper_on_path_resolves_to_the_versioned_toolkit(tmp_path):
    """A wrapper script's grandparent is not the toolkit: nvcc says where it lives."""
    real = fake_toolkit(tmp_path / "cuda-13.0")
    shim = wrapper(tmp_path / "usr" / "bin", real / "bin" / "nvcc")
    toolkit = _find(path=[shim.parent])
    assert toolkit.nvcc.path == shim
    assert toolkit.nvcc.home == real.resolve()
    assert toolkit.found_by == "nvcc on PATH"
    assert toolkit.cudart_dir == real.resolve() / "targets/x86_64-linux/lib"
    assert toolkit.cudart_link == "-lcudart"
    assert not (tmp_path / "usr" / "lib64").exists()  # where the old guess pointed


def test_symlinked_home_resolves(tmp_path):
    real = fake_toolkit(tmp_path / "cuda-13.0", lib="lib64")
    (tmp_path / "cuda").symlink_to(real)
    toolkit = _find(conventional=tmp_path / "cuda")
    assert toolkit.found_by == str(tmp_path / "cuda")
    assert toolkit.nvcc.home == real.resolve()
    assert toolkit.cudart_dir == real.resolve() / "lib64"


def test_cuda_home_wins_over_path_and_cuda_path(tmp_path):
    chosen = fake_toolkit(tmp_path / "chosen")
    other = fake_toolkit(tmp_path / "other")
    toolkit = _find(env={"CUDA_HOME": str(chosen), "CUDA_PATH": str(other)}, path=[other / "bin"])
    assert (toolkit.nvcc.home, toolkit.found_by) == (chosen.resolve(), "CUDA_HOME")


def test_cuda_path_when_cuda_home_is_unset(tmp_path):
    chosen = fake_toolkit(tmp_path / "chosen")
    other = fake_toolkit(tmp_path / "other")
    toolkit = _find(env={"CUDA_PATH": str(chosen)}, path=[other / "bin"])
    assert (toolkit.nvcc.home, toolkit.found_by) == (chosen.resolve(), "CUDA_PATH")


def test_cuda_home_without_nvcc_is_an_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CudaProblem, match=r"CUDA_HOME=.*empty has no bin/nvcc") as info:
        _find(
            env={"CUDA_HOME": str(tmp_path / "empty")}, path=[fake_toolkit(tmp_path / "ok") / "bin"]
        )
    assert "point CUDA_HOME at a CUDA toolkit folder" in info.value.hint


def test_torch_guess_comes_before_path(tmp_path):
    guessed = fake_toolkit(tmp_path / "guessed")
    on_path = fake_toolkit(tmp_path / "on_path")
    toolkit = _find(torch_cuda="13.0", torch_home=lambda: str(guessed), path=[on_path / "bin"])
    assert (toolkit.nvcc.home, toolkit.found_by) == (
        guessed.resolve(),
        "torch.utils.cpp_extension.CUDA_HOME",
    )


def test_torch_guess_of_a_wrapper_folder_is_resolved(tmp_path):
    """torch guesses dirname(dirname(which nvcc)): for a wrapper that is not the toolkit."""
    real = fake_toolkit(tmp_path / "cuda-13.0")
    shim = wrapper(tmp_path / "usr" / "bin", real / "bin" / "nvcc")
    toolkit = _find(torch_cuda="13.0", torch_home=lambda: str(shim.parent.parent))
    assert toolkit.nvcc.home == real.resolve()


def test_conventional_folder_is_the_last_resort(tmp_path):
    conventional = fake_toolkit(tmp_path / "cuda", lib="lib64")
    toolkit = _find(conventional=conventional)
    assert toolkit.nvcc.home == conventional.resolve()


def test_nothing_found_says_where_it_looked(tmp_path):
    with pytest.raises(CudaMissing) as info:
        _find(conventional=tmp_path / "cuda")
    message = info.value.message
    assert "CUDA_HOME and CUDA_PATH are unset" in message and "no nvcc on PATH" in message
    assert str(tmp_path / "cuda" / "bin" / "nvcc") in message


def test_missing_libcudart_names_the_folders(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-13.0", lib=None)
    with pytest.raises(CudaProblem) as info:
        _find(env={"CUDA_HOME": str(home)})
    assert f"no libcudart.so in the CUDA toolkit at {home.resolve()}" in info.value.message
    assert "lib64, targets/x86_64-linux/lib, lib" in info.value.message
    assert "--cpu-only" in info.value.hint


def test_runtime_soname_without_dev_symlink(tmp_path):
    """A toolkit from wheels ships libcudart.so.12 only: link that file by name."""
    home = fake_toolkit(
        tmp_path / "cu12", version="12.8", codes=NVCC12_CODES, lib="lib", dev_symlink=False
    )
    toolkit = _find(env={"CUDA_HOME": str(home)}, torch_cuda="12.8")
    assert (toolkit.cudart_dir, toolkit.cudart_link) == (
        home.resolve() / "lib",
        "-l:libcudart.so.12",
    )


def test_probe_runs_nvcc_once_per_binary(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-13.0")
    first = probe_nvcc(home / "bin" / "nvcc")
    assert calls(home) == 3  # --version, --list-gpu-code, -dryrun
    assert probe_nvcc(home / "bin" / "nvcc") == first
    assert calls(home) == 3
    assert first.version == (13, 0) and first.gpu_codes == frozenset(NVCC13_CODES)


# ---- versions --------------------------------------------------------------


def test_major_mismatch_names_the_nvcc_to_use(tmp_path):
    nvcc13 = fake_toolkit(tmp_path / "local" / "cuda-13.0")
    fake_toolkit(tmp_path / "local" / "cuda-12.4", version="12.4", codes=NVCC12_CODES)
    fake_toolkit(tmp_path / "local" / "cuda-12.8", version="12.8", codes=NVCC12_CODES)
    with pytest.raises(CudaProblem) as info:
        _find(torch_cuda="12.8", path=[nvcc13 / "bin"], conventional=tmp_path / "local" / "cuda")
    problem = info.value
    assert "is CUDA 13.0" in problem.message and "built with CUDA 12.8" in problem.message
    assert "need libcudart.so.13, while this torch loads libcudart.so.12" in problem.message
    assert f"set CUDA_HOME={tmp_path / 'local' / 'cuda-12.8'} (CUDA 12.8)" in problem.hint
    assert "--cpu-only" in problem.hint


def test_major_mismatch_without_a_matching_toolkit(tmp_path):
    nvcc13 = fake_toolkit(tmp_path / "cuda-13.0")
    with pytest.raises(CudaProblem) as info:
        _find(torch_cuda="12.6", path=[nvcc13 / "bin"])
    assert "install a CUDA 12.x toolkit and set CUDA_HOME to it" in info.value.hint


def test_minor_versions_may_differ(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-12.4", version="12.4", codes=NVCC12_CODES)
    assert _find(torch_cuda="12.8", path=[home / "bin"]).nvcc.version == (12, 4)


def test_cpu_torch_accepts_any_version(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-13.0")
    assert _find(torch_cuda=None, path=[home / "bin"]).nvcc.version == (13, 0)


# ---- archs -----------------------------------------------------------------


def _nvcc(codes=NVCC13_CODES) -> Nvcc:
    return Nvcc(Path("/x/bin/nvcc"), Path("/x"), (13, 0), frozenset(codes))


@pytest.mark.parametrize(
    "text, labels",
    [
        ("8.0;9.0+PTX", ["sm_80", "sm_90+PTX"]),
        ("8.6 9.0", ["sm_86", "sm_90"]),
        ("9.0 8.0", ["sm_80", "sm_90"]),
        (" 9.0a ; 12.0+PTX ", ["sm_90a", "sm_120+PTX"]),
        ("9.0;9.0+PTX", ["sm_90+PTX"]),
    ],
)
def test_parse_arch_list(text, labels):
    assert [a.label for a in parse_arch_list(text)] == labels


@pytest.mark.parametrize("text", ["Ampere", "sm_80", "8", "8.0+ptx", "8.0,9.0"])
def test_parse_arch_list_rejects(text):
    with pytest.raises(CudaProblem, match="TORCH_CUDA_ARCH_LIST=.*cannot read") as info:
        parse_arch_list(text)
    assert "8.0;9.0+PTX" in info.value.hint


def test_gencode_flags_keep_ptx():
    assert Arch(90, ptx=True).gencode() == [
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert Arch(90, "a").gencode() == ["-gencode=arch=compute_90a,code=sm_90a"]


def test_torch_archs_lose_what_nvcc_cannot_build_and_keep_ptx_for_the_newest():
    """cu126 wheels list sm_50..sm_90; nvcc 13 no longer builds sm_50..sm_70."""
    torch_archs = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    archs, why, dropped = select_archs(None, torch_archs, _nvcc())
    assert [a.label for a in archs] == ["sm_75", "sm_80", "sm_86", "sm_90+PTX"]
    assert dropped == ("sm_50", "sm_60", "sm_70")
    assert "torch.cuda.get_arch_list()" in why


def test_torch_archs_none_buildable():
    with pytest.raises(CudaProblem, match="can build none of the archs torch supports"):
        select_archs(None, ["sm_50", "sm_60"], _nvcc())


def test_override_is_taken_as_written():
    archs, why, dropped = select_archs("8.0;9.0", ["sm_75", "sm_120"], _nvcc())
    assert [a.label for a in archs] == ["sm_80", "sm_90"] and why == "TORCH_CUDA_ARCH_LIST"
    assert dropped == ()


def test_override_nvcc_cannot_build_is_an_error():
    with pytest.raises(
        CudaProblem, match=r"TORCH_CUDA_ARCH_LIST asks for sm_70, which nvcc 13.0"
    ) as info:
        select_archs("7.0;8.0", [], _nvcc())
    assert "this nvcc builds sm_75, sm_80" in info.value.hint


def test_cpu_torch_default_is_the_oldest_arch_with_ptx():
    archs, why, dropped = select_archs(None, [], _nvcc())
    assert [a.label for a in archs] == ["sm_75+PTX"]
    assert "a CPU torch lists none" in why and "TORCH_CUDA_ARCH_LIST overrides" in why


def test_toolkit_describes_its_choice(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-13.0")
    toolkit = _find(
        env={"CUDA_HOME": str(home)}, torch_cuda="13.0", torch_archs=["sm_70", "sm_80", "sm_90"]
    )
    text = toolkit.describe()
    assert f"CUDA 13.0 at {home.resolve()} (CUDA_HOME)" in text
    assert "archs sm_80 sm_90+PTX" in text
    assert "not built: sm_70 (nvcc 13.0 cannot target them)" in text
    assert toolkit.gencode_flags() == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]


def test_arch_list_from_the_environment(tmp_path):
    home = fake_toolkit(tmp_path / "cuda-13.0")
    toolkit = _find(env={"CUDA_HOME": str(home), "TORCH_CUDA_ARCH_LIST": "8.6 12.0+PTX"})
    assert toolkit.arch_labels == "sm_86 sm_120+PTX"
