"""The checks that opgen's generated tests run, as `torch.testing` holds torch's.

A generated `tests/test_<op>.py` imports what it needs from here: the sample
description (`TensorSpec`), pytest parameters (`device_params`,
`dtype_params`) and one `check_*` function per property of the op (values
against the reference, opcheck, gradients, torch.compile, torch.func,
torch.vmap, dynamic shapes, export, autocast, tags, CUDA graphs, DTensor
sharding). They use public torch APIs and torch's testing utilities only,
and take the op, its samples and what the spec says as arguments, so one
installed opgen tests every project. The project's own package never imports
this module: what it ships needs torch alone.
"""

from __future__ import annotations

from ._cache import inductor_cache_dir, schema_digest, use_inductor_cache_dir
from ._compare import tolerances
from ._compile import check_compile
from ._coverage import (
    CoverageWarning,
    DtypeCoverageWarning,
    OptionalPathWarning,
    ShapeCoverageWarning,
    check_dtype_coverage,
    check_optional_coverage,
)
from ._dist_pool import DistPool
from ._eager import (
    check_aliases,
    check_double_backward_refused,
    check_gradients,
    check_opcheck,
    check_reference,
    check_versions,
    device_params,
    dtype_params,
)
from ._func import check_raw_handle_refuses, check_torch_func
from ._pt2 import check_autocast, check_cuda_graph, check_cuda_graph_compiled, check_tags
from ._samples import TensorSpec, flatten, materialize
from ._shapes import check_dynamic_shapes, check_export
from ._sharding import check_sharded
from ._triton import check_inductor_traces_kernel, triton_kernel_names
from ._vmap import check_vmap, check_vmap_grad, has_batching_rule

__all__ = [
    "CoverageWarning",
    "DistPool",
    "DtypeCoverageWarning",
    "OptionalPathWarning",
    "ShapeCoverageWarning",
    "TensorSpec",
    "check_aliases",
    "check_autocast",
    "check_compile",
    "check_cuda_graph",
    "check_cuda_graph_compiled",
    "check_double_backward_refused",
    "check_dtype_coverage",
    "check_dynamic_shapes",
    "check_export",
    "check_gradients",
    "check_inductor_traces_kernel",
    "check_opcheck",
    "check_optional_coverage",
    "check_raw_handle_refuses",
    "check_reference",
    "check_sharded",
    "check_tags",
    "check_torch_func",
    "check_versions",
    "check_vmap",
    "check_vmap_grad",
    "device_params",
    "dtype_params",
    "flatten",
    "has_batching_rule",
    "inductor_cache_dir",
    "use_inductor_cache_dir",
    "materialize",
    "schema_digest",
    "tolerances",
    "triton_kernel_names",
]
