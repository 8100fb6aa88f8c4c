"""Note [Build settings]: `[build]` in opgen.toml and in a C++ op's spec reaches the compile, the link,
build/build.ninja and setup.py; paths stay in the project, flags reach the compiler as written.

The fast tests check the plan, the quoting (ninja runs a recording compiler through the shell),
the stamp and the messages; the slow ones build an op that needs every setting, with opgen build
and as a wheel, and a build that lacks an include folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from opgen.build.ninja import Toolchain, plan_build, write_ninja
from opgen.build.stamp import Watched, collect_inputs, stale_reason, write_stamp
from opgen.build.toolchain.compiler_output import missing_header_hints
from opgen.build.toolchain.settings import resolve_settings
from opgen.errors import OpgenError
from opgen.project.load import load_project
from opgen.scaffold.new_op import new_op

from _cpp_support import opgen, python
from _support import has_nvcc

# a define whose value a shell would split or redirect if it were not quoted (`$`, backquotes and
# backslashes are refused: nvcc hands its arguments to a shell inside double quotes)
ODD = "MSG=\"a;b |& <x> 'q' (touch pwned) #\""
ODD_TOML = json.dumps(ODD)


def _project(root: Path, build: str, devices: list[str] | None = None) -> Path:
    new_op(root, "mylib::foo", None, "cpp", devices or ["cpu"])
    config = root / "opgen.toml"
    config.write_text(config.read_text() + "\n[build]\n" + build)
    return root


def _recording_compiler(folder: Path) -> Path:
    """A "compiler" that writes its arguments (one JSON list a call) and the files ninja expects."""
    script = folder / "record-cxx"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "args = sys.argv[1:]\n"
        "with open(os.environ['OPGEN_RECORD'], 'a') as out:\n"
        "    out.write(json.dumps(args) + '\\n')\n"
        "obj, depfile = args[args.index('-o') + 1], args[args.index('-MF') + 1]\n"
        "os.makedirs(os.path.dirname(obj), exist_ok=True)\n"
        "open(obj, 'w').close()\n"
        "open(depfile, 'w').write(obj + ': \\n')\n"
    )
    script.chmod(0o755)
    return script


def _toolchain(cxx: str) -> Toolchain:
    import shutil

    return Toolchain(
        cxx=cxx,
        ninja=shutil.which("ninja") or "ninja",
        torch_dir=Path(torch.__file__).parent,
        torch_cuda=None,
        cxx11_abi=True,
    )


def test_ninja_hands_every_setting_to_the_compiler_as_one_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(
        tmp_path / "p",
        f'cxx_flags = ["-std=c++20", "-Wno-unused-variable"]\ndefines = ["SCALE=3", {ODD_TOML}]\n'
        'include_dirs = ["third party/inc", "$OPGEN_TEST_INC"]\n',
    )
    (root / "third party" / "inc").mkdir(parents=True)
    outside = tmp_path / "env include"
    outside.mkdir()
    monkeypatch.setenv("OPGEN_TEST_INC", str(outside))
    record = tmp_path / "calls.jsonl"
    monkeypatch.setenv("OPGEN_RECORD", str(record))
    tools = _toolchain(str(_recording_compiler(tmp_path)))
    plan = plan_build(load_project(root), tools)
    write_ninja(root, plan)
    run = subprocess.run(
        [tools.ninja, "-f", "build/build.ninja", "build/obj/csrc/cpu/foo.cpp.o"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (args,) = [json.loads(line) for line in record.read_text().splitlines()]
    expected = ["-std=c++20", "-Wno-unused-variable", "-DSCALE=3", f"-D{ODD}"]
    assert [a for a in args if a in expected] == expected
    assert ["-Ithird party/inc", f"-I{outside}"] == [a for a in args if a.startswith("-I")]
    assert args.index("-std=c++17") < args.index("-std=c++20")  # the user's flag wins
    assert not list(root.rglob("pwned*")) and not list(tmp_path.glob("pwned*"))


def test_plan_links_libraries_and_compiles_extra_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path / "p", 'library_dirs = ["$OPGEN_TEST_LIB", "vendor/lib"]\n')
    (root / "vendor" / "lib").mkdir(parents=True)
    (root / "vendor" / "src").mkdir(parents=True)
    (root / "vendor" / "src" / "helper.cpp").write_text("int helper() { return 1; }\n")
    (root / "vendor" / "src" / "helper.cu").write_text("int cuda_helper() { return 1; }\n")
    spec = root / "ops" / "foo.toml"
    spec.write_text(
        spec.read_text()
        + '\n[build]\nsources = ["vendor/src/helper.cpp", "vendor/src/helper.cu"]\nlibraries = ["m"]\n'
    )
    monkeypatch.setenv("OPGEN_TEST_LIB", str(tmp_path))
    plan = plan_build(load_project(root), _toolchain("g++"))
    ldflags = re.search(r"^ldflags = (.*)$", plan.ninja_text, re.M).group(1)
    assert f"-L{tmp_path} -Wl,-rpath,{tmp_path}" in ldflags
    assert "-Lvendor/lib '-Wl,-rpath,$$ORIGIN/../vendor/lib'" in ldflags
    assert ldflags.endswith(" -lm")
    assert "build build/obj/vendor/src/helper.cpp.o: cxx vendor/src/helper.cpp" in plan.ninja_text
    assert "vendor/src/helper.cu" in plan.cuda_sources  # compiled where CUDA is: none here
    link = re.search(r"^build mylib/_C\.abi3\.so: link (.*)$", plan.ninja_text, re.M).group(1)
    assert "build/obj/vendor/src/helper.cpp.o" in link.split()


def test_an_unset_variable_is_an_error_at_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _project(tmp_path, 'include_dirs = ["${CUTLASS_DIR}/include"]\n')
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    project = load_project(root)  # generate-time checks leave the variable alone
    with pytest.raises(OpgenError) as caught:
        resolve_settings(project, "mylib/_C.abi3.so")
    (problem,) = caught.value.diagnostics
    line = next(
        i
        for i, text in enumerate((root / "opgen.toml").read_text().splitlines(), 1)
        if text.startswith("include_dirs")
    )
    assert (problem.path, problem.line) == (root / "opgen.toml", line)
    assert "CUTLASS_DIR is not set" in problem.message and "export CUTLASS_DIR=" in problem.hint
    monkeypatch.setenv("CUTLASS_DIR", "relative/path")
    with pytest.raises(OpgenError, match="not an absolute path"):
        resolve_settings(project, "mylib/_C.abi3.so")


def test_a_symlink_out_of_the_project_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.cpp").write_text("int x;\n")
    root = tmp_path / "p"
    root.mkdir()
    (root / "inc").symlink_to(outside)
    (root / "helper.cpp").symlink_to(outside / "secret.cpp")
    (root / "inside").mkdir()
    (root / "inside_link").symlink_to(root / "inside")  # a symlink that stays inside is fine
    _project(root, 'include_dirs = ["inc", "inside_link"]\nsources = ["helper.cpp"]\n')
    with pytest.raises(OpgenError) as caught:
        load_project(root)
    messages = [(d.line, d.message) for d in caught.value.diagnostics]
    assert [m for _, m in messages] == [
        "build.include_dirs has 'inc', which is a symlink (or under one) that leads out of the project",
        "build.sources has 'helper.cpp', which is a symlink (or under one) that leads out of the project",
    ]
    assert all(line and line > 1 for line, _ in messages)


def test_setup_py_holds_the_settings_in_its_fence(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        'cxx_flags = ["-ffast-math"]\ndefines = ["ENABLE_FP8"]\ninclude_dirs = ["$CUTLASS_DIR/include"]\n',
    )
    (root / "third_party").mkdir()
    (root / "third_party" / "x.cu").write_text("\n")
    spec = root / "ops" / "foo.toml"
    spec.write_text(spec.read_text() + '\n[build]\nsources = ["third_party/x.cu"]\n')
    opgen("generate", cwd=root)
    text = (root / "setup.py").read_text()
    fence = text[text.index("# opgen: begin build_settings") : text.index("# opgen: end")]
    assert fence.splitlines()[1:] == [
        'CXX_FLAGS = ["-ffast-math"]',
        "NVCC_FLAGS = []",
        'DEFINES = ["ENABLE_FP8"]',
        'INCLUDE_DIRS = ["$CUTLASS_DIR/include"]',
        "LIBRARY_DIRS = []",
        "LIBRARIES = []",
        'SOURCES = ["third_party/x.cu"]',
    ]
    # the user's setup.py keeps its edits; the fence follows the settings
    (root / "setup.py").write_text(text.replace('version="0.1.0"', 'version="0.2.0"'))
    config = root / "opgen.toml"
    config.write_text(config.read_text().replace('"-ffast-math"', '"-ffast-math", "-g"'))
    opgen("generate", cwd=root)
    text = (root / "setup.py").read_text()
    assert 'CXX_FLAGS = ["-ffast-math", "-g"]' in text and 'version="0.2.0"' in text


def test_the_stamp_watches_sources_and_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "opgen.toml").write_text("")
    (tmp_path / "vendor").mkdir()
    source = tmp_path / "vendor" / "helper.cpp"
    source.write_text("int helper() { return 1; }\n")
    monkeypatch.setenv("OPGEN_TEST_DIR", "/opt/a")
    watched = Watched(("vendor/helper.cpp",), ("OPGEN_TEST_DIR",))
    write_stamp(tmp_path, collect_inputs(tmp_path, watched), [], None, False, watched)
    assert stale_reason(tmp_path) is None
    monkeypatch.setenv("OPGEN_TEST_DIR", "/opt/b")
    assert stale_reason(tmp_path) == "$OPGEN_TEST_DIR changed since the last build"
    monkeypatch.setenv("OPGEN_TEST_DIR", "/opt/a")
    source.write_text("int helper() { return 2; }\n")
    assert stale_reason(tmp_path) == "vendor/helper.cpp changed since the last build"


def test_a_missing_header_names_its_include_and_the_setting() -> None:
    output = (
        "[1/3] CXX csrc/cpu/foo.cpp\nFAILED: build/obj/csrc/cpu/foo.cpp.o\n"
        "In file included from csrc/cpu/imported/ext.cpp:20:\n"
        "ext/kernels.cpp:3:10: fatal error: cutlass/cutlass.h: No such file or directory\n"
        "    3 | #include <cutlass/cutlass.h>\n"
        "csrc/cuda/foo.cu:2:10: fatal error: Python.h: No such file or directory\n"
    )
    cutlass, python_h = missing_header_hints(output)
    assert cutlass.startswith("ext/kernels.cpp:3 includes <cutlass/cutlass.h>")
    assert "include_dirs under [build] in opgen.toml" in cutlass
    assert python_h.startswith("csrc/cuda/foo.cu:2 includes <Python.h>, which needs Python's")
    assert missing_header_hints("error: expected ';'\n") == []


HEADER_KERNEL = """
#include "tiles/tile.h"

namespace mylib {
torch::stable::Tensor foo_cpu(const torch::stable::Tensor& x) {
  torch::stable::Tensor out = torch::stable::empty_like(x);
  float* dst = out.mutable_data_ptr<float>();
  const float* src = x.const_data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) dst[i] = src[i] * TILE;
  return out;
}
}  // namespace mylib
"""


@pytest.mark.slow  # compiles a stable-ABI op, twice
def test_a_missing_include_folder_fails_with_the_fix_then_builds(tmp_path: Path) -> None:
    root = tmp_path
    new_op(root, "mylib::foo", None, "cpp", ["cpu", "cuda"])
    (root / "vendor" / "tiles").mkdir(parents=True)
    (root / "vendor" / "tiles" / "tile.h").write_text("#define TILE 4.0f\n")
    kernel = root / "csrc" / "cpu" / "foo.cpp"
    kernel.write_text('#include "../foo.h"\n' + HEADER_KERNEL)
    failed = opgen("build", cwd=root, check=False)
    assert failed.returncode == 1
    assert "error: build failed" in failed.stderr
    assert (
        "hint: csrc/cpu/foo.cpp:3 includes <tiles/tile.h>, which no include folder of the build "
        "holds: add the folder that holds tiles/tile.h to include_dirs under [build]"
    ) in failed.stderr
    assert "CUDA: linked" not in failed.stdout + failed.stderr  # nothing was linked
    config = root / "opgen.toml"
    config.write_text(config.read_text() + '\n[build]\ninclude_dirs = ["vendor"]\n')
    built = opgen("build", cwd=root)
    if has_nvcc():
        assert "opgen: CUDA: linked 1 .cu file(s)" in built.stdout
    run = python("import torch, mylib; print(mylib.foo(torch.ones(2)).tolist())", cwd=root)
    assert run.stdout.strip() == "[4.0, 4.0]", run.stderr


EVERY_KERNEL = """
#include <cmath>
#include <string_view>

#include "bonus.h"   // include_dirs: a folder of the project
#include <env_bonus.h>  // include_dirs: $OPGEN_TEST_INC

float helper_offset();                   // sources: vendor/helper.cpp (the op's [build])
extern "C" float library_value();        // libraries + library_dirs: libopgentest.so

static_assert(__cplusplus >= 202002L, "cxx_flags: -std=c++20 did not reach the compiler");
static_assert(std::string_view(MSG) == "a;b |& <x> 'q' (touch pwned) #");

namespace mylib {
torch::stable::Tensor foo_cpu(const torch::stable::Tensor& x) {
  const torch::stable::Tensor xc = torch::stable::contiguous(x);
  torch::stable::Tensor out = torch::stable::empty_like(xc);
  const float* src = xc.const_data_ptr<float>();
  float* dst = out.mutable_data_ptr<float>();
  const float add = helper_offset() + library_value() + bonus() + env_bonus();
  for (int64_t i = 0; i < xc.numel(); ++i) dst[i] = src[i] * SCALE + add;
  return out;
}
}  // namespace mylib
"""
EVERY_CUDA_KERNEL = """
#include "../foo.h"
#ifndef __CUDACC_EXTENDED_LAMBDA__
#error "cuda_flags: --extended-lambda did not reach nvcc"
#endif
int cuda_helper_blocks(long n);  // sources: vendor/helper.cu, compiled by nvcc and linked

namespace mylib {
torch::stable::Tensor foo_cuda(const torch::stable::Tensor& x) {
  STD_TORCH_CHECK(cuda_helper_blocks(x.numel()) >= 0 && SCALE == 3, "unreachable");
  return x;
}
}  // namespace mylib
"""
RUN = """
import torch, mylib
print(mylib.foo(torch.ones(2)).tolist())
"""


@pytest.mark.slow  # compiles and links a stable-ABI op (and nvcc, where installed), then a wheel
def test_an_op_that_needs_every_setting_builds_with_opgen_and_as_a_wheel(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    root.mkdir()
    env_inc, lib = tmp_path / "env include", tmp_path / "lib"
    env_inc.mkdir()
    lib.mkdir()
    (env_inc / "env_bonus.h").write_text("inline float env_bonus() { return 0.25f; }\n")
    (lib / "value.cpp").write_text('extern "C" float library_value() { return 2.0f; }\n')
    subprocess.run(
        ["g++", "-shared", "-fPIC", str(lib / "value.cpp"), "-o", str(lib / "libopgentest.so")],
        check=True,
    )
    new_op(root, "mylib::foo", None, "cpp", ["cpu", "cuda"])
    (root / "vendor" / "include").mkdir(parents=True)
    (root / "vendor" / "include" / "bonus.h").write_text("inline float bonus() { return 0.5f; }\n")
    (root / "vendor" / "helper.cpp").write_text("float helper_offset() { return 1.0f; }\n")
    (root / "vendor" / "helper.cu").write_text(
        "__global__ void opgen_unused_kernel() {}\n"
        "int cuda_helper_blocks(long n) { return static_cast<int>((n + 255) / 256); }\n"
    )
    config = root / "opgen.toml"
    config.write_text(
        config.read_text()
        + "\n[build]\n"
        + 'cxx_flags = ["-std=c++20"]\ncuda_flags = ["--extended-lambda", "--use_fast_math"]\n'
        + f'defines = ["SCALE=3", {ODD_TOML}]\n'
        + 'include_dirs = ["vendor/include", "$OPGEN_TEST_INC"]\n'
    )
    spec = root / "ops" / "foo.toml"
    spec.write_text(
        spec.read_text()
        + '\n[build]\nsources = ["vendor/helper.cpp", "vendor/helper.cu"]\n'
        + 'library_dirs = ["$OPGEN_TEST_LIB"]\nlibraries = ["opgentest"]\n'
    )
    (root / "csrc" / "cpu" / "foo.cpp").write_text('#include "../foo.h"\n' + EVERY_KERNEL)
    (root / "csrc" / "cuda" / "foo.cu").write_text(EVERY_CUDA_KERNEL)
    env = {**os.environ, "OPGEN_TEST_INC": str(env_inc), "OPGEN_TEST_LIB": str(lib)}

    build = subprocess.run(
        [sys.executable, "-m", "opgen", "build"], cwd=root, env=env, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-2000:]
    if has_nvcc():
        assert "NVCC vendor/helper.cu" in build.stdout and "NVCC csrc/cuda/foo.cu" in build.stdout
    run = subprocess.run(
        [sys.executable, "-c", RUN], cwd=root, env=env, capture_output=True, text=True
    )
    assert run.stdout.strip() == "[6.75, 6.75]", run.stderr  # 3 + 1 + 2 + 0.5 + 0.25
    # another value of a variable the settings read makes the build stale
    moved = subprocess.run(
        [sys.executable, "-m", "opgen", "build"],
        cwd=root,
        env={**env, "OPGEN_TEST_INC": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert moved.returncode == 1 and "env_bonus.h" in moved.stdout, moved.stdout + moved.stderr
    assert not list(tmp_path.rglob("pwned*"))

    wheel = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            "dist",
            ".",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert wheel.returncode == 0, wheel.stdout[-4000:] + wheel.stderr[-3000:]
    (built,) = (root / "dist").glob("*.whl")
    unpacked = tmp_path / "unpacked"
    zipfile.ZipFile(built).extractall(unpacked)
    from_wheel = subprocess.run(
        [sys.executable, "-c", RUN], cwd=unpacked, env=env, capture_output=True, text=True
    )
    assert from_wheel.stdout.strip() == "[6.75, 6.75]", from_wheel.stderr
    assert not list(tmp_path.rglob("pwned*"))


def test_a_stamp_cannot_make_the_check_read_outside_the_project(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    root = tmp_path / "p"
    (root / "opgen.toml").write_text("")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside\n")
    watched = Watched(("../secret.txt", str(secret)), ("NOT A NAME",))
    inputs = collect_inputs(root, watched)
    assert not any("secret" in rel for rel in inputs.files)
    assert "$NOT A NAME" not in inputs.environment


def test_a_source_name_a_shell_would_run_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path, "")
    (root / "csrc" / "cuda").mkdir(parents=True, exist_ok=True)
    (root / "csrc" / "cuda" / "x$(touch pwned).cu").write_text("\n")
    with pytest.raises(OpgenError, match="the file name holds one of"):
        plan_build(load_project(root), _toolchain("g++"))
