#include "common/Suggest.hpp"

#include "common/Text.hpp"

#include <algorithm>
#include <cctype>

namespace ddlsim {
std::size_t edit_distance(std::string_view a_text, std::string_view b_text)
{
  const std::string a = lower(a_text), b = lower(b_text);
  const std::size_t n = a.size(), m = b.size();
  // Three rows of the dynamic programme: i - 2, i - 1, i.
  std::vector<std::size_t> before(m + 1), previous(m + 1), current(m + 1);
  for (std::size_t j = 0; j <= m; ++j)
    previous[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);  // neighbours swapped
    }
    before.swap(previous);
    previous.swap(current);
  }
  return previous[m];
}

std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& candidates)
{
  std::optional<std::string> best;
  std::size_t best_distance = 0;
  const std::string w = lower(word);
  for (const std::string& c : candidates) {
    if (c.empty() || c == word)
      continue;
    const std::size_t d = edit_distance(word, c);
    const std::size_t longer = std::max(word.size(), c.size());
    const std::size_t bound = std::clamp<std::size_t>(longer / 3, 1, 3);
    const std::string lc = lower(c);
    const bool cut = w.size() >= 3 && lc.size() >= 3 && (lc.rfind(w, 0) == 0 || w.rfind(lc, 0) == 0);
    if (d > bound && !cut)
      continue;
    const std::size_t score = d > bound ? bound + 1 : d;  // a cut word ranks after every close one
    if (!best || score < best_distance) {
      best = c;
      best_distance = score;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates)
{
  const auto name = closest_name(word, candidates);
  return name ? " (did you mean '" + *name + "'?)" : std::string();
}

}  // namespace ddlsim
