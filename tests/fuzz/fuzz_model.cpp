// Fuzz target: model files (models/ModelLoader.hpp), and the totals `ddlsim model` prints.
#include "models/ModelLoader.hpp"
#include "tests/fuzz/FuzzInput.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    const models::Model m = models::load_model_file(fuzz::as_file(data, size, "model.yaml"));
    volatile double sink  = m.parameter_count() + m.forward_flop_per_sample() + m.backward_flop_per_sample() +
                           m.stashed_bytes_per_sample(Dtype::bf16) + static_cast<double>(m.blocks().size());
    (void)sink;
  });
}
