"""Note [Autograd fast path]: the generated wrapper skips the Python autograd kernel
only when nothing needs it; gradients, torch.func and torch.compile still work."""

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

    def outcome(fn):
        try:
            return fn()
        except RuntimeError as exc:  # the same refusal as the raw op, if torch refuses
            return str(exc)

    for transform in (lambda f: torch.func.grad(lambda t: f(t).sum())(x), lambda f: torch.vmap(f)(x)):
        ours, raw = outcome(lambda: transform(foo)), outcome(lambda: transform(module._handle))
        assert type(ours) is type(raw) and (ours == raw if isinstance(raw, str) else torch.allclose(ours, raw))
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
