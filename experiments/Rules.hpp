// The cross-field rules of a derived point (tp and the heads, sequence and context parallelism, ZeRO
// groups, experts, the pipeline's split, recomputation, parameter servers, GPUs and batch), written
// once. Experiment::resolve reports each problem at its key's line; rule_problems (Experiment.hpp)
// gives their messages to `ddlsim search`, which screens its layouts with them.
//
//   check_rules(point, [&](const std::string& key, const std::string& message) { ... },
//               [](std::initializer_list<std::string> keys) { return *keys.begin(); },
//               [&] { return nothing_reported_yet; });
#pragma once

#include "experiments/Experiment.hpp"

#include <functional>
#include <initializer_list>
#include <string>

namespace ddlsim::experiments {

/// Reports one problem: the key it is at, and what is wrong.
using RuleProblem = std::function<void(const std::string& key, const std::string& message)>;
/// Of the keys a rule over several keys involves, the one to blame (a swept or changed one first).
using RuleBlame = std::function<std::string(std::initializer_list<std::string> keys)>;

/// Every cross-field rule of `p` (the resource guard aside), each problem through `problem` at the key
/// `blame` picks; `clean()` says whether nothing was reported so far (the GPU count and the interleaved
/// schedule's micro-batches are only checked then).
void check_rules(const PointConfig& p, const RuleProblem& problem, const RuleBlame& blame,
                 const std::function<bool()>& clean);

} // namespace ddlsim::experiments
