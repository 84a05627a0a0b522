// Order statistics of measured samples, one definition for every fit and measurement rule (calibration/) and the
// GPU programs' iteration times, so that "the median of the runs" means the same everywhere.
//
//   median({3.0, 1.0, 2.0}) == 2.0;   median({1.0, 2.0, 3.0, 4.0}) == 2.5;   median({}) == 0.0
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ddlsim {

/// The middle value of `samples` (any unit), or the mean of the two middle ones when their number is even;
/// 0 for none. Takes the samples by value, to sort them.
inline double median(std::vector<double> samples)
{
  if (samples.empty())
    return 0.0;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  return n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
}

} // namespace ddlsim
