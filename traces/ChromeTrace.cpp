#include "traces/ChromeTrace.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ddlsim::traces {
namespace {

// Microseconds with up to three decimals (whole nanoseconds), trailing zeros dropped: what keeps
// big timelines small.
std::string microseconds(std::int64_t ns)
{
  char buf[32];
  const std::int64_t whole = std::llabs(ns) / 1000;
  const std::int64_t frac  = std::llabs(ns) % 1000;
  const char* sign         = ns < 0 ? "-" : "";
  if (frac == 0)
    std::snprintf(buf, sizeof buf, "%s%lld", sign, static_cast<long long>(whole));
  else if (frac % 100 == 0)
    std::snprintf(buf, sizeof buf, "%s%lld.%01lld", sign, static_cast<long long>(whole),
                  static_cast<long long>(frac / 100));
  else if (frac % 10 == 0)
    std::snprintf(buf, sizeof buf, "%s%lld.%02lld", sign, static_cast<long long>(whole),
                  static_cast<long long>(frac / 10));
  else
    std::snprintf(buf, sizeof buf, "%s%lld.%03lld", sign, static_cast<long long>(whole), static_cast<long long>(frac));
  return buf;
}

void write_value(std::ostream& out, const TraceValue& value)
{
  if (const double* number = std::get_if<double>(&value))
    out << json_number(*number);
  else
    out << '"' << json_escape(std::get<std::string>(value)) << '"';
}

}  // namespace

std::string json_escape(const std::string& text)
{
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '"': out += "\\\""; break;
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      } else {
        out += c;
      }
    }
  }
  return out;
}

std::string json_number(double value)
{
  if (!std::isfinite(value))
    return "null";
  char buf[32];
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0)  // 2^53: exact integers
    std::snprintf(buf, sizeof buf, "%.0f", value == 0 ? 0.0 : value);       // never "-0"
  else
    std::snprintf(buf, sizeof buf, "%.12g", value);
  return buf;
}

std::int64_t ChromeTrace::nanoseconds(double seconds) { return std::llround(seconds * 1e9); }

void ChromeTrace::set_track_name(int pid, int tid, const std::string& process_name, const std::string& thread_name)
{
  process_names_[pid] = process_name;
  thread_names_[{pid, tid}] = thread_name;
}

void ChromeTrace::write(std::ostream& out) const
{
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&] {
    if (!first)
      out << ",\n";
    first = false;
  };
  for (const auto& [pid, name] : process_names_) {
    sep();
    out << R"({"ph":"M","name":"process_name","pid":)" << pid << R"(,"args":{"name":")" << json_escape(name)
        << "\"}}";
  }
  for (const auto& [ids, name] : thread_names_) {
    sep();
    out << R"({"ph":"M","name":"thread_name","pid":)" << ids.first << ",\"tid\":" << ids.second
        << R"(,"args":{"name":")" << json_escape(name) << "\"}}";
  }
  for (const auto& e : events_) {
    sep();
    const std::int64_t start = nanoseconds(e.start_s);
    out << R"({"ph":"X","name":")" << json_escape(e.name) << R"(","cat":")" << json_escape(e.category)
        << "\",\"pid\":" << e.pid << ",\"tid\":" << e.tid << ",\"ts\":" << microseconds(start)
        << ",\"dur\":" << microseconds(nanoseconds(e.end_s) - start);
    if (!e.args.empty()) {
      out << ",\"args\":{";
      for (std::size_t i = 0; i < e.args.size(); ++i) {
        out << (i ? "," : "") << '"' << json_escape(e.args[i].first) << "\":";
        write_value(out, e.args[i].second);
      }
      out << '}';
    }
    out << '}';
  }
  for (const auto& f : flows_) {
    sep();
    out << R"({"ph":")" << static_cast<char>(f.phase) << R"(","id":)" << f.id << R"(,"name":")" << json_escape(f.name)
        << R"(","cat":")" << json_escape(f.category) << "\",\"pid\":" << f.pid << ",\"tid\":" << f.tid
        << ",\"ts\":" << microseconds(nanoseconds(f.time_s)) << (f.phase == FlowPhase::end ? ",\"bp\":\"e\"}" : "}");
  }
  for (const auto& c : counters_) {
    sep();
    out << R"({"ph":"C","name":")" << json_escape(c.name) << "\",\"pid\":" << c.pid
        << ",\"ts\":" << microseconds(nanoseconds(c.time_s)) << ",\"args\":{";
    for (std::size_t i = 0; i < c.values.size(); ++i)
      out << (i ? "," : "") << '"' << json_escape(c.values[i].first) << "\":" << json_number(c.values[i].second);
    out << "}}";
  }
  out << "\n]";
  if (!metadata_.empty()) {
    out << ",\"otherData\":{";
    for (std::size_t i = 0; i < metadata_.size(); ++i) {
      out << (i ? "," : "") << '"' << json_escape(metadata_[i].first) << "\":";
      write_value(out, metadata_[i].second);
    }
    out << '}';
  }
  out << "}\n";
}

}  // namespace ddlsim::traces
