// A network as an ordered list of layers (the topological order pipeline partitioning uses),
// with totals. Built by the generators (make_gpt) or read from a model YAML (load_model_file).
//
//   Model gpt = make_gpt({.name = "gpt2-small", .layers = 12, .hidden = 768, .heads = 12,
//                         .seq = 1024, .vocab = 50257});
//   gpt.parameter_count();          // 124,439,808
//   gpt.forward_flop_per_sample();  // flop for one sequence
#pragma once

#include "models/Layer.hpp"

#include <string>
#include <vector>

namespace ddlsim::models {

class Model {
public:
  Model() = default;
  Model(std::string name, std::vector<Layer> layers);

  const std::string& get_name() const { return name_; }
  const std::vector<Layer>& layers() const { return layers_; }
  std::size_t size() const { return layers_.size(); }

  double parameter_count() const;
  double forward_flop_per_sample() const;
  double backward_flop_per_sample() const;
  double stashed_elements_per_sample() const;

private:
  std::string name_;
  std::vector<Layer> layers_;
};

}  // namespace ddlsim::models
