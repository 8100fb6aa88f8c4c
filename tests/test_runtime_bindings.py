"""The private torch bindings of the typed wrappers live in one generated `<package>/_runtime.py`.

If a torch upgrade removed one, the wrappers fall back to the regular dispatch path
(same results), warn once, and the generated `test_private_torch_bindings` fails.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from opgen.new import new_op

# What a torch without the binding looks like to the generated code (torch's own modules keep theirs).
_HIDE = {
    "torch._C._any_requires_grad": "_any_requires_grad",
    "torch._C.DispatchKey.AutogradFunctionality": "DispatchKey",
    "torch._C._after_autograd_keyset": "_after_autograd_keyset",
}
# Hiding DispatchKey hides every key the runtime reads.
_MISSING = {
    "torch._C._any_requires_grad": ["torch._C._any_requires_grad"],
    "torch._C.DispatchKey.AutogradFunctionality": [
        "torch._C.DispatchKey.AutogradFunctionality",
        "torch._C.DispatchKey.ADInplaceOrView",
    ],
    "torch._C._after_autograd_keyset": ["torch._C._after_autograd_keyset"],
}

_SCRIPT = """
import types
import warnings
import torch

real = torch._C


class WithoutBinding(types.ModuleType):
    def __getattr__(self, name):
        if name == {hide!r} == "DispatchKey":
            return type("DispatchKey", (), {{}})
        if name == {hide!r}:
            raise AttributeError(name)
        return getattr(real, name)


torch._C = WithoutBinding("torch._C")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import mylib
    from mylib import _runtime
torch._C = real
runtime_warnings = [w for w in caught if issubclass(w.category, RuntimeWarning) and "mylib:" in str(w.message)]
assert len(runtime_warnings) == 1, [str(w.message) for w in caught]
assert {name!r} in str(runtime_warnings[0].message)
assert _runtime.MISSING == {missing!r}, _runtime.MISSING

x = torch.randn(4, 3)
assert torch.allclose(mylib.foo(x), x.sin())  # the regular path
assert torch.allclose(torch.ops.mylib.foo(x), x.sin())  # the Autograd kernel's fallback
xg = x.clone().requires_grad_()
mylib.foo(xg).sum().backward()
assert torch.allclose(xg.grad, x.cos())
xg.grad = None
torch.ops.mylib.foo(xg).sum().backward()
assert torch.allclose(xg.grad, x.cos())

import pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "tests/test_foo.py", "-k", "private_torch_bindings"])
print("generated test exit code", int(code))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runtime")
    new_op(root, "mylib::foo")
    return root


def test_every_binding_lives_in_runtime_py_and_op_modules_only_import_them(project: Path) -> None:
    runtime = (project / "mylib" / "_runtime.py").read_text()
    module = (project / "mylib" / "_generated" / "foo.py").read_text()
    for name in ("_any_requires_grad", "_are_functorch_transforms_active", "AutogradFunctionality", "_dispatch_tls_is_dispatch_key_excluded", "_dispatch_tls_set_dispatch_key_excluded", "_op", "_after_autograd_keyset", "redispatch_boxed", "_FunctionBase", "peek_interpreter_stack"):
        assert name in runtime, name
        assert f"torch._C.{name}" not in module and f".{name}" not in module.replace("._runtime", ""), name
    assert "from .._runtime import (" in module


@pytest.mark.slow  # runs a generated test in a fresh interpreter
def test_the_generated_binding_test_passes_on_this_torch(project: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_foo.py", "-k", "private_torch_bindings"], cwd=project, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and "1 passed" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("name", sorted(_HIDE))
@pytest.mark.slow  # runs a generated test in a fresh interpreter
def test_a_missing_binding_falls_back_warns_once_and_fails_the_generated_test(project: Path, name: str) -> None:
    script = _SCRIPT.format(hide=_HIDE[name], name=name, missing=_MISSING[name])
    run = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "generated test exit code 1" in run.stdout, run.stdout[-3000:]
    assert name in run.stdout  # the failing test names the missing binding


def test_a_missing_op_callable_falls_back_to_the_overload(project: Path) -> None:
    script = textwrap.dedent(
        """
        import types, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from mylib import _runtime
            handle = types.SimpleNamespace()
            assert _runtime.direct_call(handle) is handle and _runtime.direct_call(handle) is handle
        assert _runtime.MISSING == ["torch._ops.OpOverload._op"], _runtime.MISSING
        assert len([w for w in caught if "OpOverload._op" in str(w.message)]) == 1
        print("ok")
        """
    )
    run = subprocess.run([sys.executable, "-c", script], cwd=project, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
