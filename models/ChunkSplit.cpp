#include "models/ChunkSplit.hpp"

namespace ddlsim::models {

bool splits_evenly(const Model& model, int chunks)
{
  const Architecture* a = model.architecture();
  if (a == nullptr || chunks <= 1)
    return true;
  return a->layers % chunks == 0 || (a->layers + 2) % chunks == 0;
}

std::vector<int> even_virtual_stages(const Model& model, int pp, int max_v)
{
  std::vector<int> out;
  const Architecture* a = model.architecture();
  const int layers = a != nullptr ? a->layers + 2 : static_cast<int>(model.blocks().size());
  for (int v = 2; v <= max_v && pp * v <= layers; ++v)
    if (splits_evenly(model, pp * v))
      out.push_back(v);
  return out;
}

}  // namespace ddlsim::models
