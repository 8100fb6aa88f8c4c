"""Checks a project opts into that need torch names which are not public API.

Note [Private torch checks]
Everything else opgen generates uses public torch APIs only. Three guarantees
cannot be had that way (torch 2.13); a project that wants them lists them in
`opgen.toml` (`[options] private_torch = [...]`), and this module, which the
package imports last, installs them:
- "raw_handle_transforms": through the raw `torch.ops` handle, forward-mode AD
  works and torch.func transforms raise an error naming the typed wrapper. With
  register_autograd alone, torch.func.jvp through the handle silently returns
  zero tangents and torch.func.grad raises an error about autograd.Function. It
  takes an Autograd kernel of the op's own that redispatches below autograd
  (`torch._C._after_autograd_keyset`) and asks whether a transform is active
  (`torch._C._are_functorch_transforms_active`); it costs about 2 µs per call.
- "raw_handle_versions": the raw handle of a stable-ABI or Python `library` op
  bumps the version counter of every tensor it writes (the typed wrapper does
  that with public APIs), and runs an op that also returns values below
  autograd. It takes ADInplaceOrView and Autograd kernels that redispatch below
  their keys.
- "sharding_cache_key": DTensor caches each op's sharding decision under a key
  made of the tensor specs and the arguments from the first `int` argument on
  (register_sharding takes no say in it): a rule or an output shape that depends
  on an earlier non-tensor argument would be served another call's decision.
  The key is widened through DTensor's private sharding propagator.
Each name is looked up when the check is installed; a torch without it gets a
warning naming what is missing, and the check is not installed.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.autograd.forward_ad import unpack_dual

__all__ = [
    "MISSING",
    "raw_handle_transforms",
    "raw_handle_versions",
    "sharding_cache_key",
]

# The private names this torch lacks: the checks that needed them are not installed.
MISSING: list[str] = []
_LIBRARIES: list[torch.library.Library] = []  # registrations live as long as their Library
_INSIDE = threading.local()  # inside a Function's forward, which calls the op again


def _private(owner: Any, name: str, label: str) -> Any:
    value = getattr(owner, name, None)
    if value is None and label not in MISSING:
        MISSING.append(label)
        warnings.warn(
            f"this torch ({torch.__version__}) lacks {label}: an opted-in private_torch check "
            "is not installed (see Note [Private torch checks])",
            RuntimeWarning,
            stacklevel=3,
        )
    return value


def _library(handle: Any) -> torch.library.Library:
    library = torch.library.Library(handle.namespace, "FRAGMENT")
    _LIBRARIES.append(library)
    return library


def _has_tangent(values: Sequence[Any]) -> bool:
    for value in values:
        for tensor in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(tensor, torch.Tensor) and unpack_dual(tensor).tangent is not None:
                return True
    return False


def _requires_grad(values: Sequence[Any]) -> bool:
    return torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad
        for value in values
        for t in (value if isinstance(value, (list, tuple)) else (value,))
    )


def raw_handle_transforms(
    handle: Any, apply: Callable[..., Any], public: str, keys: Sequence[str]
) -> None:
    """The op's Autograd kernel (on `keys`): `apply` (its Function) for a gradient or a
    tangent, an error naming the typed wrapper `public` under torch.func transforms, else
    below autograd."""
    active = _private(
        torch._C, "_are_functorch_transforms_active", "torch._C._are_functorch_transforms_active"
    )
    after = _private(torch._C, "_after_autograd_keyset", "torch._C._after_autograd_keyset")
    if active is None or after is None:
        return

    def autograd(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(_INSIDE, "on", False):
            if active():
                raise RuntimeError(
                    f"{public}: torch.func transforms (grad, vjp, jacrev, jvp, jacfwd) cannot reach "
                    f"this op's formulas through torch.ops; call {public}(...) eagerly instead"
                )
            values = (*args, *kwargs.values())
            if _requires_grad(values) or _has_tangent(values):
                _INSIDE.on = True
                try:
                    return apply(*args, **kwargs)
                finally:
                    _INSIDE.on = False
        return handle.redispatch(keyset & after, *args, **kwargs)

    library = _library(handle)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Overriding a previously registered kernel")
        warnings.filterwarnings("ignore", message="Warning only once for all operators")
        for key in keys:
            library.impl(handle._opname, autograd, key, with_keyset=True)


def raw_handle_versions(handle: Any, returns_values: bool) -> None:
    """The op's ADInplaceOrView kernel bumps the versions of what it writes; with
    `returns_values`, its Autograd kernel runs it below autograd."""
    after_view = _private(
        torch._C, "_after_ADInplaceOrView_keyset", "torch._C._after_ADInplaceOrView_keyset"
    )
    after = _private(torch._C, "_after_autograd_keyset", "torch._C._after_autograd_keyset")
    if after_view is None or after is None:
        return
    written = [
        (index, argument.name, argument.kwarg_only)
        for index, argument in enumerate(handle._schema.arguments)
        if argument.alias_info is not None and argument.alias_info.is_write
    ]

    def bump(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        result = handle.redispatch(keyset & after_view, *args, **kwargs)
        for index, name, keyword in written:
            value = kwargs.get(name) if keyword else args[index] if index < len(args) else None
            tensors = value if isinstance(value, (list, tuple)) else (value,)
            torch.autograd.graph.increment_version([t for t in tensors if t is not None])
        return result

    def below_autograd(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        return handle.redispatch(keyset & after, *args, **kwargs)

    library = _library(handle)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Warning only once for all operators")
        library.impl(handle._opname, bump, "ADInplaceOrView", with_keyset=True)
    if returns_values:
        library.impl(handle._opname, below_autograd, "Autograd", with_keyset=True)


def sharding_cache_key(handle: Any, first: int, keywords: Sequence[str]) -> None:
    """Key DTensor's sharding cache on every argument from `first` on (and `keywords`)."""
    from torch.distributed.tensor import DTensor

    dispatcher = _private(DTensor, "_op_dispatcher", "DTensor._op_dispatcher")
    propagator = getattr(dispatcher, "sharding_propagator", None)
    schema_info = _private(propagator, "op_to_schema_info", "DTensor's op_to_schema_info")
    try:
        from torch.distributed.tensor._op_schema import RuntimeSchemaInfo
    except ImportError:
        RuntimeSchemaInfo = _private(
            None, "RuntimeSchemaInfo", "torch.distributed.tensor._op_schema"
        )
    if schema_info is not None and RuntimeSchemaInfo is not None:
        schema_info[handle] = RuntimeSchemaInfo(first, list(keywords) or None, needs_pytree=True)
