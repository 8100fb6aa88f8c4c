"""The typed wrapper of a generated op: the registered op (its gradients from
torch.library.register_autograd) unless a forward-mode tangent or a torch.func transform needs
the op's autograd.Function; both give the same values, and torch.compile traces the op."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from _support import run_cli

_SCRIPT = textwrap.dedent(
    """
    import torch
    import torch.autograd.forward_ad as fwAD
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
    raw = x.clone().requires_grad_()  # the raw handle's gradients: torch.library.register_autograd
    module._op(raw).sum().backward()
    assert torch.allclose(raw.grad, x.cos())

    assert torch.allclose(torch.func.grad(lambda t: foo(t).sum())(x), x.cos())
    assert torch.allclose(torch.func.jvp(foo, (x,), (torch.ones_like(x),))[1], x.cos())
    assert torch.allclose(torch.func.jacrev(foo)(x[0]), torch.diag(x[0].cos()))
    assert torch.allclose(torch.vmap(foo)(x), torch.vmap(module._op)(x))
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(foo(fwAD.make_dual(x, torch.ones_like(x)))).tangent
        assert torch.allclose(tangent, x.cos())

    calls = []
    apply = module._FooFunction.apply
    module._FooFunction.apply = lambda *args: calls.append(len(args)) or apply(*args)
    foo(x)
    foo(xg).sum().backward()
    assert calls == []  # plain autograd: register_autograd's kernel, no Function
    with fwAD.dual_level():
        foo(fwAD.make_dual(x, torch.ones_like(x)))
    assert calls == [1], calls
    torch.func.grad(lambda t: foo(t).sum())(x)
    assert len(calls) > 1, calls
    module._FooFunction.apply = apply

    compiled = torch.compile(foo, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(xg), x.sin()) and compiled(xg).requires_grad
    print("ok")
    """
)


@pytest.mark.slow  # runs torch.compile and torch.func end to end
def test_the_wrapper_takes_the_function_only_for_forward_mode_and_torch_func(tmp_path):
    assert run_cli("new", "mylib::foo", cwd=tmp_path).exit_code == 0
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr
