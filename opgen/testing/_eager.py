"""The checks of an op called eagerly: values, registration, aliases, versions, gradients."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.autograd.gradcheck import GradcheckError

from ._compare import Bound, assert_same, describe, message, outputs, tolerances
from ._samples import Samples, clone, materialize, tensors_of
from ._schema import bind

__all__ = [
    "check_aliases",
    "check_double_backward_refused",
    "check_gradients",
    "check_opcheck",
    "check_reference",
    "check_versions",
    "device_params",
    "dtype_params",
    "no_sample_message",
]


def device_params(devices: Iterable[str], *, triton: bool = False) -> list[Any]:
    """pytest parameters of the devices; CUDA is skipped where it is not available.

    `triton`: the op runs a Triton kernel, which runs on CPU only under Triton's
    interpreter (TRITON_INTERPRET=1, which the generated conftest sets where CUDA is
    absent) and is then not tested on CUDA: the interpreter is on for the whole process.
    """
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"
    params = []
    for device in devices:
        marks = []
        if device == "cuda":
            marks.append(
                pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")
            )
            if triton:
                marks.append(
                    pytest.mark.skipif(
                        interpreted, reason="Triton's interpreter is on: the kernel runs on CPU"
                    )
                )
        elif device == "cpu" and triton:
            marks.append(
                pytest.mark.skipif(
                    not interpreted,
                    reason="the Triton kernel runs on CPU only under Triton's interpreter "
                    "(TRITON_INTERPRET=1, set by tests/conftest.py where CUDA is absent)",
                )
            )
        params.append(pytest.param(device, marks=marks, id=device))
    return params


def dtype_params(dtypes: Iterable[Any]) -> list[Any]:
    """pytest parameters of the dtypes, named as the spec names them (`float32`)."""
    return [pytest.param(dtype, id=str(dtype).removeprefix("torch.")) for dtype in dtypes]


def check_reference(
    op: Any,
    reference: Callable[..., Any],
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    mutated: tuple[str, ...] = (),
    written: tuple[str, ...] = (),
    atol: Bound = None,
    rtol: Bound = None,
) -> None:
    """`op` (the registered op or the typed wrapper) matches the spec's reference expression.

    An op that returns values is compared on them, and on the arguments in `written`
    (those it writes without returning them) against the reference's copies of them,
    which the reference writes in place as the op does; an op that returns nothing
    is compared on the arguments it writes, which the reference returns.
    """
    limits = tolerances(dtype, atol, rtol)
    for index, kwargs in enumerate(materialize(samples, device, dtype)):
        copies = clone(kwargs)
        expected = reference(**copies)
        got = outputs(op(**kwargs), kwargs, mutated)
        assert_same(got, expected, message(op, index), **limits)
        for name in written:
            assert_same(kwargs[name], copies[name], _written_message(op, index, name), **limits)


def _written_message(op: Any, index: int, name: str) -> Callable[[str], str]:
    where = message(op, index)
    return lambda text: where(
        f"{name}, which the op writes: {text}\n(the reference must write {name} as the op "
        f"does, in place on its copy: e.g. `({name}.copy_(...), result)[-1]`)"
    )


_OPCHECK_TESTS = (
    "test_schema",
    "test_autograd_registration",
    "test_faketensor",
    "test_aot_dispatch_dynamic",
)


def check_opcheck(
    op: Any,
    samples: Samples,
    device: str,
    dtype: Any,
    *,
    schema: str,
    grad_inputs: Iterable[str] = (),
    aot_error: str | None = None,
) -> None:
    """torch.library.opcheck on every sample, also with `grad_inputs` requiring grad.

    `schema` is the op's registered schema: the arguments go by position in its
    order. With `aot_error`, torch is documented to fail the aot test for this
    schema (Note [What the generated tests expect] in opgen/api/testing.py): the other
    tests must pass and the aot test must fail with that message.
    """
    from torch.testing._internal.optests import OpCheckError

    tests = _OPCHECK_TESTS if aot_error is None else _OPCHECK_TESTS[:-1]
    grad_inputs = tuple(grad_inputs)
    variants: list[tuple[str, ...]] = [()] + ([grad_inputs] if grad_inputs else [])
    for requires_grad in variants:
        for index, kwargs in enumerate(materialize(samples, device, dtype, requires_grad)):
            args, rest = bind(schema, kwargs)
            try:
                torch.library.opcheck(op, args, rest, test_utils=tests)
            except OpCheckError as error:
                grad = f" with {', '.join(requires_grad)} requiring grad" if requires_grad else ""
                raise OpCheckError(message(op, index)(f"{error}{grad}")) from error
            if aot_error is not None:
                args, rest = bind(schema, clone(kwargs))
                with pytest.raises(OpCheckError, match=aot_error):
                    torch.library.opcheck(op, args, rest, test_utils="test_aot_dispatch_dynamic")


def check_aliases(
    op: Any, samples: Samples, device: str, dtype: Any, *, aliases: Iterable[tuple[int, str, bool]]
) -> None:
    """Each annotated return is its argument (written, `Tensor(a!)`) or a view of it
    (`Tensor(a)`); `aliases` holds (return index, argument, written)."""
    for index, kwargs in enumerate(materialize(samples, device, dtype)):
        result = op(**kwargs)
        results = result if isinstance(result, tuple) else (result,)
        for position, name, written in aliases:
            got, argument = results[position], kwargs.get(name)
            if argument is None:
                continue
            if written:
                assert got is argument, message(op, index)(
                    f"return {position} is not the argument {name}"
                )
            else:
                same = got.untyped_storage().data_ptr() == argument.untyped_storage().data_ptr()
                assert same, message(op, index)(f"return {position} is not a view of {name}")


def _overwrite_detector(tensor: Any) -> Callable[[], bool]:
    """Whether autograd will see that `tensor` was written after this call.

    A product saved for backward keeps the tensor's version; backward refuses
    to run once an in-place op has bumped it. That is the public face of the
    version counter, and what a kernel writing through a data pointer without
    bumping it would break.
    """
    with torch.enable_grad():
        probe = torch.ones((), device=tensor.device, requires_grad=True)
        product = tensor * probe

    def overwritten() -> bool:
        try:
            torch.autograd.grad(product, probe, torch.ones_like(product))
        except RuntimeError as error:
            if "modified by an inplace operation" in str(error):
                return True
            raise
        return False

    return overwritten


def check_versions(
    op: Any, samples: Samples, device: str, dtype: Any, *, mutated: Iterable[str]
) -> None:
    """The op bumps the version counter of every tensor it writes, as torch's in-place ops do:
    autograd then refuses a backward through a value it overwrote."""
    for index, kwargs in enumerate(materialize(samples, device, dtype)):
        watched = [
            (name, _overwrite_detector(tensor))
            for name in mutated
            for tensor in tensors_of(kwargs.get(name))
        ]
        op(**kwargs)
        for name, overwritten in watched:
            assert overwritten(), message(op, index)(
                f"{name}'s version counter did not change: autograd cannot tell that the op "
                "overwrote it"
            )


def no_sample_message(samples: Samples, names: Iterable[str], spec: str, what: str) -> str:
    """Why no sample exercised the gradient of `names`, sample by sample."""
    names = tuple(names)
    reasons = []
    for index, sample in enumerate(materialize(samples, "cpu", torch.float64)):
        values = [sample[name] for name in names if sample.get(name) is not None]
        if not values:
            reasons.append(f"sample {index + 1} leaves out {' and '.join(names)}")
        elif all(isinstance(v, list) and not v for v in values):
            reasons.append(f"sample {index + 1} gives an empty list")
        else:
            reasons.append(f"sample {index + 1} has requires_grad = false or a non-floating dtype")
    shown = " or ".join(repr(name) for name in names)
    return (
        f"no sample of {spec} {what} {shown} ({'; '.join(reasons)}): add a [[test.samples]] entry "
        f"that gives {names[0]} a floating-point tensor (requires_grad defaults to true)"
    )


def _bound_to(fn: Callable[..., Any], kwargs: dict[str, Any], input_name: str) -> Any:
    """`fn` as gradcheck calls it: the tensors of `input_name` that require grad, positionally."""
    value: Any = kwargs.get(input_name)
    positions = (
        [i for i, t in enumerate(value) if isinstance(t, torch.Tensor) and t.requires_grad]
        if isinstance(value, list)
        else None
    )

    def call(*tensors: Any) -> Any:
        bound = dict(kwargs)
        if positions is None:
            bound[input_name] = tensors[0]
        else:
            items = list(value)
            for position, tensor in zip(positions, tensors, strict=True):
                items[position] = tensor
            bound[input_name] = items
        return tuple(tensors_of(fn(**bound)))  # gradcheck takes tensors, not lists or None

    return call


# gradcheck's finite differences in float32: a step float32 resolves, and errors of its size
_FLOAT32_GRADCHECK = {"eps": 1e-3, "atol": 1e-2, "rtol": 1e-2}


def _forward_gradcheck(fn: Callable[..., Any], inputs: list[Any], **loose: float) -> bool:
    """gradcheck of forward-mode AD in fast mode (random projections of the Jacobian: one
    forward-mode call instead of one per input element)."""
    return bool(
        torch.autograd.gradcheck(
            fn, inputs, check_forward_ad=True, check_backward_ad=False, fast_mode=True, **loose
        )
    )


@contextmanager
def _float64_hint(fn: Any, dtype: Any, spec: str) -> Iterator[None]:
    """An error of the op itself under gradcheck in float64 says where float64 comes from."""
    try:
        yield
    except GradcheckError:
        raise
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
        if dtype != torch.float64:
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AssertionError(
            f"gradcheck calls {describe(fn)} in float64 (its finite differences need that "
            f"precision), and it raised {type(exc).__name__}: {first}. A kernel without a "
            "float64 path fails here: add one (the fenced dtype check of a C++ kernel accepts "
            f"float64 for ops with [grad]), or check the gradients in float32: "
            f'gradcheck_dtype = "float32" under [test] in {spec} (looser tolerances)'
        ) from exc


def check_gradients(
    op: Any,
    samples: Samples,
    device: str,
    input_name: str,
    *,
    gradgrad: bool = True,
    forward_ad: bool = False,
    wrapper: Callable[..., Any] | None = None,
    raw_forward_ad: bool = False,
    spec: str = "the spec",
    dtype: Any = torch.float64,
) -> int:
    """gradcheck (and gradgradcheck) in float64 with only `input_name` requiring grad.

    `dtype` float32 (`[test] gradcheck_dtype`): in float32, with looser tolerances.

    With `forward_ad` (the spec has a [jvp] table) a second gradcheck checks
    forward-mode AD through `wrapper` (and through `op` too with
    `raw_forward_ad`): the [jvp] formulas' tangents against finite differences.
    torch's register_autograd has no forward mode: the raw op reaches the [jvp]
    formulas only where the project opts into it. Samples that omit the input
    (an optional Tensor) or give it no tensor that requires grad are skipped, but
    at least one sample must check it. The first checked sample is also
    gradchecked through `wrapper`, the typed function users call. Returns the
    number of samples checked.
    """
    checked = 0
    forward = [fn for fn in (wrapper, op if raw_forward_ad or wrapper is None else None) if fn]
    loose = _FLOAT32_GRADCHECK if dtype == torch.float32 else {}
    for kwargs in materialize(samples, device, dtype, (input_name,)):
        inputs = [t for t in tensors_of(kwargs.get(input_name)) if t.requires_grad]
        if not inputs:
            continue
        call = _bound_to(op, kwargs, input_name)
        with _float64_hint(op, dtype, spec), warnings.catch_warnings():
            # gradcheck warns about inputs that are not float64: only with gradcheck_dtype float32
            warnings.filterwarnings("ignore", "Input #", UserWarning)
            assert torch.autograd.gradcheck(call, inputs, **loose)
            if forward_ad:
                for fn in forward:
                    assert _forward_gradcheck(
                        _bound_to(fn, kwargs, input_name), inputs, **loose
                    ), f"forward-mode gradcheck of {describe(fn)}"
            if gradgrad:
                assert torch.autograd.gradgradcheck(call, inputs, **loose)
            if wrapper is not None and checked == 0:
                typed = _bound_to(wrapper, kwargs, input_name)
                assert torch.autograd.gradcheck(
                    typed, inputs, **loose
                ), f"gradcheck of {describe(wrapper)}"
        checked += 1
    if not checked:
        raise AssertionError(
            no_sample_message(samples, (input_name,), spec, "checks the gradient of")
        )
    return checked


def leaves(kwargs: dict[str, Any], names: Iterable[str]) -> list[Any]:
    """The tensors of the arguments `names` that require grad."""
    return [t for name in names for t in tensors_of(kwargs.get(name)) if t.requires_grad]


def check_double_backward_refused(
    op: Any,
    samples: Samples,
    device: str,
    *,
    differentiable: tuple[str, ...],
    spec: str = "the spec",
    dtype: Any = torch.float64,
) -> None:
    """With double_backward = false, differentiating a gradient again raises (in `dtype`, the
    spec's gradcheck_dtype)."""
    for kwargs in materialize(samples, device, dtype, differentiable):
        inputs = leaves(kwargs, differentiable)
        if not inputs:
            continue
        out = next(o for o in tensors_of(op(**kwargs)) if o.requires_grad)
        (first,) = torch.autograd.grad(out.sum(), inputs[:1], create_graph=True)
        with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
            torch.autograd.grad(first.sum(), inputs[:1])
        return
    raise AssertionError(no_sample_message(samples, differentiable, spec, "gives a gradient for"))
