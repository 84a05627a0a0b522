#include "traces/ChromeTrace.hpp"

#include <cstdio>

namespace ddlsim::traces {

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
  char ts[64];
  for (const auto& e : events_) {
    sep();
    std::snprintf(ts, sizeof ts, "\"ts\":%.6f,\"dur\":%.6f", e.start_s * 1e6, e.duration_s * 1e6);
    out << R"({"ph":"X","name":")" << json_escape(e.name) << R"(","cat":")" << json_escape(e.category)
        << "\",\"pid\":" << e.pid << ",\"tid\":" << e.tid << "," << ts;
    if (!e.args.empty()) {
      out << ",\"args\":{";
      for (std::size_t i = 0; i < e.args.size(); ++i)
        out << (i ? "," : "") << '"' << json_escape(e.args[i].first) << "\":\"" << json_escape(e.args[i].second)
            << '"';
      out << '}';
    }
    out << '}';
  }
  out << "\n]}\n";
}

}  // namespace ddlsim::traces
