"""Note [Autograd fast path]: the generated wrapper skips the Python autograd kernel
only when nothing needs it; gradients, forward mode, torch.func and torch.compile still work,
and the raw torch.ops handle refuses torch.func with a clear error (Note [Keyset Autograd kernel])."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from _support import run_cli

_SCRIPT = textwrap.dedent(
    """
    import torch
    from mylib import foo
    from mylib._generated import foo as module

    x = torch.randn(5, 3)
    y = foo(x)
    assert y.grad_fn is None and torch.allclose(y, x.sin())

    xg = x.clone().requires_grad_()
    y = foo(xg)
    assert y.grad_fn is not None
    y.sum().backward()
    assert torch.allclose(xg.grad, x.cos())
    with torch.no_grad():
        assert not foo(xg).requires_grad

    import torch.autograd.forward_ad as fwAD

    assert torch.allclose(torch.func.grad(lambda t: foo(t).sum())(x), x.cos())
    assert torch.allclose(torch.func.jvp(foo, (x,), (torch.ones_like(x),))[1], x.cos())
    assert torch.allclose(torch.vmap(foo)(x), torch.vmap(module._handle)(x))
    for transform in (torch.func.grad, lambda f: lambda t: torch.func.jvp(f, (t,), (t,))[1]):
        try:
            transform(lambda t: module._handle(t).sum())(x)
            raise AssertionError("torch.func through the raw handle did not raise")
        except RuntimeError as exc:
            assert "call mylib.foo(...) eagerly instead" in str(exc), exc
    with fwAD.dual_level():  # forward mode through the raw handle: the kernel applies the Function
        tangent = fwAD.unpack_dual(module._handle(fwAD.make_dual(x, torch.ones_like(x)))).tangent
        assert torch.allclose(tangent, x.cos())
    compiled = torch.compile(foo, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(xg), x.sin()) and compiled(xg).requires_grad

    calls = []
    original = module._exclude
    module._exclude = lambda key, state: calls.append(state) or original(key, state)
    foo(x)
    foo(xg)
    assert calls == [True, False], calls  # the fast path once, and the autograd key restored

    autograd = torch._C.DispatchKey.AutogradFunctionality
    excluded = torch._C._dispatch_tls_is_dispatch_key_excluded
    def failing(*args):
        assert excluded(autograd)
        raise RuntimeError("kernel failed")

    call, module._call = module._call, failing
    try:
        foo(x)
    except RuntimeError:
        pass
    module._call = call
    assert not excluded(autograd)  # restored after a failing call too
    with torch._C._AutoDispatchBelowAutograd():  # already below autograd: left excluded
        foo(x)
        assert excluded(autograd)
    assert not excluded(autograd)
    print("ok")
    """
)


@pytest.mark.slow  # runs torch.compile and torch.func end to end
def test_fast_path_keeps_autograd_transforms_and_compile(tmp_path):
    assert run_cli("new", "mylib::foo", cwd=tmp_path).exit_code == 0
    run = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
