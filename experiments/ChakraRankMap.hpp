// Rank maps: a Chakra export whose alike ranks are written once (`ddlsim export chakra --rank-map`,
// docs/chakra.md#rank-maps). Chakra has no way to share a file between ranks, and no two ranks' files
// are the same: each names its own process groups, peers, transfer tags and task numbers. A rank's
// *template* is its file with those taken out:
//
//   pg_name              "@k": the k-th process group the rank's file names (its group slots)
//   comm_src, comm_dst   the k-th other rank the file names (its peer slots), -1 for the rank itself;
//   root                 likewise (a broadcast's first member)
//   ddlsim_task          0, and comm_tag 0: the rank's own, in node order, go to its numbers
//   ddlsim_rank          -1, and the metadata node's process groups "@process_groups"
//
// The *binding* of a rank is what was taken out: its groups and peers by slot, its task numbers and
// tags. A rank whose template is byte for byte an earlier rank's reuses it; binding the template
// again gives the rank's file byte for byte (tests/cli/test_cli_chakra.py checks every rank).
//
// On disk: DIR/<prefix>.t<K>.et (the templates, Chakra files), DIR/rank_map.json (schema,
// templates, each rank's template, groups and peers), DIR/rank_map.numbers (each rank's task numbers
// and tags, as varints of their differences: a byte or two a node, where a node of a template takes
// a few hundred) and DIR/comm_groups.json (the groups by number, as always). `model: {chakra: DIR}`
// reads such a folder like any other; `ddlsim export chakra` of that workload writes the per-rank
// files back for ASTRA-sim.
#pragma once

#include "traces/ChakraTrace.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace ddlsim::experiments::rank_map {

/// The file name of the map in a rank-mapped folder.
inline constexpr const char* map_file = "rank_map.json";
/// The ranks' task numbers and tags beside it.
inline constexpr const char* numbers_file = "rank_map.numbers";

/// What binds a template to one rank.
struct RankBinding {
  int template_index = 0;
  std::vector<std::string> groups;  ///< pg_name per group slot
  std::vector<std::int64_t> peers;  ///< rank per peer slot
  std::vector<std::uint64_t> tasks; ///< ddlsim_task of each node that has one, in node order
  std::vector<std::int64_t> tags;   ///< comm_tag of each node that has one, in node order
};

/// Rank `rank`'s file as a template, and its binding (all but template_index). `groups[i]` are the
/// members of process group "i + 1" (the metadata node is templated when it lists exactly those).
traces::EtFile make_template(traces::EtFile file, int rank, const std::vector<std::vector<int>>& groups,
                             RankBinding& binding);

/// Rank `rank`'s file from its template and binding. Throws TraceError naming `where` when the binding
/// does not fit the template (a slot or class it lacks).
traces::EtFile bind_template(traces::EtFile tmpl, int rank, const RankBinding& binding,
                             const std::vector<std::vector<int>>& groups, const std::string& where);

/// Writes a rank-mapped folder, rank by rank: what stays in memory is each rank's names, the numbers
/// file's bytes (a byte or two per node) and the templates (their bytes up to 256 MiB, else their hashes).
class Writer {
public:
  Writer(std::string dir, std::string prefix, std::vector<std::vector<int>> groups);
  /// Adds the next rank's file (ranks 0, 1, ... in order); writes its template unless an earlier
  /// rank's is the same.
  void add(const traces::EtFile& file);
  /// Writes DIR/rank_map.numbers, then DIR/rank_map.json; returns the templates' paths.
  std::vector<std::string> finish();

private:
  std::string dir_, prefix_;
  std::vector<std::vector<int>> groups_;
  std::vector<std::string> templates_;                // paths
  std::unordered_multimap<std::size_t, int> by_hash_; // template bytes' hash -> index
  std::vector<std::size_t> sizes_;                    // each template's bytes
  std::vector<std::string> kept_;                     // each template's bytes, or empty past the budget
  std::size_t kept_bytes_                  = 0;
  static constexpr std::size_t kept_budget = std::size_t{256} << 20;
  std::vector<RankBinding> bindings_;                 // without their numbers: those are in numbers_
  std::string numbers_;                               // rank_map.numbers, written by finish()
};

/// True when `dir` holds a rank map.
bool is_rank_mapped(const std::string& dir);

/// A rank-mapped folder's files, rank by rank, each with the name errors give it ("DIR/p.t0.et as
/// rank 3"), the process groups read from DIR/comm_groups.json. Throws TraceError naming the file and
/// the key (a template missing, a binding that does not fit its template, the groups file absent).
std::vector<traces::EtFile> read(const std::string& dir, std::vector<std::string>& names);

} // namespace ddlsim::experiments::rank_map
