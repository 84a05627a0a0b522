#include "calibration/TableCostModel.hpp"

#include <fmt/core.h>
#include <cstdio>

namespace ddlsim::calibration {
namespace {

// The table op that prices a kind of work.
const char* table_op(WorkKind kind)
{
  switch (kind) {
  case WorkKind::gemm: return "gemm";
  case WorkKind::batched_gemm: return "batched_gemm";
  case WorkKind::conv2d: return "conv2d";
  case WorkKind::memory: return "pointwise";
  case WorkKind::unknown:
  case WorkKind::attention: return nullptr;  // a fused kernel: never a library kernel's measured time
  }
  return nullptr;
}

}  // namespace

TableCostModel::TableCostModel(const CalibrationProfile& profile)
    : roofline_(profile), profile_name_(profile.name), tables_(profile.kernel_tables)
{
  for (auto& row : index_)
    row.fill(-1);
  for (const KernelTable& t : tables_)
    grids_.emplace_back(t.op == "gemm" ? t.shapes : std::map<std::string, double>{});
  for (WorkKind kind : {WorkKind::gemm, WorkKind::batched_gemm, WorkKind::conv2d, WorkKind::memory}) {
    const std::string op = table_op(kind);
    for (const auto& entry : dtype_table.entries) {
      for (std::size_t i = 0; i < tables_.size(); ++i) {
        const KernelTable& t = tables_[i];
        if (t.op == op && (kind == WorkKind::memory || t.dtype == entry.name)) {
          index_[static_cast<std::size_t>(kind)][static_cast<std::size_t>(entry.value)] = static_cast<int>(i);
          break;  // the first table for (op, dtype) wins; `calibrate fit` writes one
        }
      }
    }
  }
}

const KernelTable* TableCostModel::table_for(const KernelWork& work) const
{
  const int i = index_[static_cast<std::size_t>(work.kind)][static_cast<std::size_t>(work.dtype)];
  if (i < 0)
    return nullptr;
  const KernelTable& t = tables_[static_cast<std::size_t>(i)];
  const double amount = work.kind == WorkKind::memory ? work.bytes : work.flop;
  return t.covers(amount) ? &t : nullptr;
}

double TableCostModel::seconds(const KernelWork& work) const
{
  if (work.unaligned && roofline_.prices_unaligned(work.dtype))  // the tables hold aligned GEMMs only
    return roofline_.seconds(work);
  if (work.kind == WorkKind::memory && work.access != MemoryAccess::contiguous)
    return seconds(roofline_.as_contiguous(work));
  if (!work.shape.empty() && work.kind != WorkKind::unknown && work.kind != WorkKind::memory &&
      work.kind != WorkKind::attention) {
    const int i = index_[static_cast<std::size_t>(work.kind)][static_cast<std::size_t>(work.dtype)];
    if (i >= 0) {
      const auto& shapes = tables_[static_cast<std::size_t>(i)].shapes;
      if (auto it = shapes.find(work.shape); it != shapes.end())
        return it->second;
      long long m = 0, n = 0, k = 0, batch = 0;
      const GemmGrid& grid = grids_[static_cast<std::size_t>(i)];
      if (work.kind == WorkKind::gemm && !grid.empty() && parse_gemm_shape(work.shape, m, n, k, batch) && batch == 1)
        if (const double t = grid.seconds(static_cast<double>(m), static_cast<double>(n), static_cast<double>(k)); t > 0)
          return t;
    }
  }
  if (const KernelTable* t = table_for(work))
    return t->seconds(work.kind == WorkKind::memory ? work.bytes : work.flop);
  return roofline_.seconds(work);
}

std::string TableCostModel::describe() const
{
  return fmt::format("tables({}: {} measured) + {}", profile_name_, tables_.size(), roofline_.describe());
}

std::unique_ptr<CostModel> make_cost_model(const CalibrationProfile& profile)
{
  if (profile.kernel_tables.empty())
    return std::make_unique<RooflineCostModel>(profile);
  return std::make_unique<TableCostModel>(profile);
}

}  // namespace ddlsim::calibration
