#pragma once
#include <optional>
#include <torch/all.h>

void silu_and_mul(torch::Tensor& out, torch::Tensor& input);

void rms_norm(torch::Tensor& out, torch::Tensor& input, torch::Tensor& weight, double epsilon);

void scaled_copy(torch::Tensor& out, torch::Tensor const& input,
                 std::optional<torch::Tensor>& scale, int64_t block);
