// Fuzz target: experiment files (experiments/Experiment.hpp), then the first points of the sweep
// resolved, filtered by `where:` and described as a CSV row would be.
#include "experiments/Evaluate.hpp"
#include "experiments/Experiment.hpp"
#include "tests/fuzz/FuzzInput.hpp"

#include <algorithm>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  using namespace ddlsim;
  return fuzz::refusing_is_fine([&] {
    const auto exp = experiments::Experiment::load(fuzz::as_file(data, size, "experiment.yaml"));
    for (std::size_t i = 0; i < std::min<std::size_t>(exp.point_count(), 4); ++i) {
      const experiments::PointConfig p = exp.point(i);
      if (exp.accepts(p))
        experiments::describe_point(p);
    }
  });
}
