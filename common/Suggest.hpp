// "Did you mean": the closest valid name to a misspelt one, for error messages.
//
//   closest_name("pipline", {"pp", "pipeline", "dp"})  -> "pipeline"
//   did_you_mean("tpp", {"pp", "tp", "dp"})             -> " (did you mean 'tp'?)"  (first of the closest)
//
// Closeness is the optimal-string-alignment distance (insertions, deletions, substitutions and
// swaps of neighbours, each 1), case-insensitive; a candidate counts when it is at most a third of
// the longer word's length away (at least 1, at most 3 edits), or when one word is the other with a
// prefix or suffix cut (e.g. 'llama3' for 'llama3-8b'). Ties go to the earliest candidate.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddlsim {

/// Edits between a and b (case-insensitive optimal string alignment distance).
std::size_t edit_distance(std::string_view a, std::string_view b);

/// The candidate closest to `word` within the bound above, or nullopt.
std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& candidates);

/// " (did you mean 'NAME'?)" for the closest candidate, or "" when none is close.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ddlsim
