#include "models/Model.hpp"

#include <numeric>

namespace ddlsim::models {
namespace {
template <typename F> double sum(const std::vector<Layer>& layers, F field)
{
  return std::accumulate(layers.begin(), layers.end(), 0.0,
                         [&](double acc, const Layer& l) { return acc + field(l); });
}
}  // namespace

Model::Model(std::string name, std::vector<Layer> layers) : name_(std::move(name)), layers_(std::move(layers)) {}

double Model::parameter_count() const { return sum(layers_, [](const Layer& l) { return l.parameters; }); }
double Model::forward_flop_per_sample() const { return sum(layers_, [](const Layer& l) { return l.forward_flop; }); }
double Model::backward_flop_per_sample() const { return sum(layers_, [](const Layer& l) { return l.backward_flop; }); }
double Model::stashed_elements_per_sample() const
{
  return sum(layers_, [](const Layer& l) { return l.stashed_elements; });
}

}  // namespace ddlsim::models
