// Megatron-Core's rule for interleaved pipelines: a transformer's layers split evenly over the
// pp x virtual_stages model chunks, either the layers alone or the layers plus the embedding and
// the loss counted as one layer each (account_for_embedding_in_pipeline_split and
// account_for_loss_in_pipeline_split; Llama 3 405B's 126 + 2 layers over 16 x 8 chunks). The
// experiment's validator refuses other interleaved splits; the parallel search only tries these.
//
//   if (!models::splits_evenly(model, pp * v)) ...           // refused
//   for (int v : models::even_virtual_stages(model, pp, 8))  // 2..8 that split evenly
#pragma once

#include "models/Model.hpp"

#include <vector>

namespace ddlsim::models {

/// Whether `chunks` model chunks split the model's layers evenly (or its layers + 2). A model
/// without a transformer architecture (no layer count) splits by blocks: always true.
bool splits_evenly(const Model& model, int chunks);

/// The virtual-stage counts v in [2, max_v] whose pp x v chunks split evenly, each chunk holding at
/// least one layer, in increasing order.
std::vector<int> even_virtual_stages(const Model& model, int pp, int max_v);

}  // namespace ddlsim::models
