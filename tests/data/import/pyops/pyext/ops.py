"""A test fixture modelled on Python custom ops: custom_op, register_fake, register_autograd."""

import numpy as np
import torch
from torch import Tensor


@torch.library.custom_op("pyext::numpy_sin", mutates_args=(), device_types="cpu")
def numpy_sin(x: Tensor) -> Tensor:
    """sin(x), computed by numpy."""
    x_np = x.numpy(force=True)
    return torch.from_numpy(np.sin(x_np))


@numpy_sin.register_fake
def _(x):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    (x,) = inputs
    ctx.save_for_backward(x)


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos()


numpy_sin.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("pyext::scaled_add", mutates_args=())
def scaled_add(a: Tensor, b: Tensor, alpha: float = 1.0) -> Tensor:
    return a + alpha * b


@scaled_add.register_fake
def _(a, b, alpha=1.0):
    return torch.empty_like(a)
