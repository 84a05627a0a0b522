#include "models/Memory.hpp"

namespace ddlsim::models {

MemoryBreakdown estimate_stage_memory(const Model& model, StageRange stage, Dtype dtype, Optimizer optimizer,
                                      double in_flight_samples)
{
  double params = 0;
  double stashed = 0;
  for (std::size_t i = stage.begin; i < stage.end; ++i) {
    params += model.layers()[i].parameters;
    stashed += model.layers()[i].stashed_elements;
  }
  const double d = dtype_bytes(dtype);
  const bool mixed = d < 4.0;
  const double state_per_param = optimizer == Optimizer::adam ? 8.0 : optimizer == Optimizer::momentum ? 4.0 : 0.0;
  MemoryBreakdown m;
  m.weights = params * d;
  m.gradients = params * d;
  m.optimizer_state = params * (state_per_param + (mixed ? 4.0 : 0.0));
  m.activations = stashed * d * in_flight_samples;
  return m;
}

}  // namespace ddlsim::models
