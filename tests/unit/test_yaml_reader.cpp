#include "common/YamlReader.hpp"

#include <doctest/doctest.h>

using namespace ddlsim;

namespace {
// Reads a small document the way the loaders do and returns what was reported.
std::vector<Diagnostic> read(const std::string& text)
{
  Diagnostics diags("in.yaml");
  YAML::Node root = load_yaml_string(text, "in.yaml");
  YamlMap top(root, "", diags);
  top.required_string("name");
  if (auto link = top.map("link")) {
    link->required_quantity("bandwidth", Dimension::bandwidth);
    link->quantity("latency", Dimension::time, 0.0, Bound::non_negative);
    link->check_unknown_keys();
  }
  top.integer("count", 1, 1, 64);
  top.check_unknown_keys();
  return diags.list();
}
}  // namespace

TEST_CASE("a clean document gives no diagnostics")
{
  CHECK(read("name: a\nlink: {bandwidth: 1GBps, latency: 1us}\ncount: 4\n").empty());
}

TEST_CASE("problems name file, line and dotted key; all are reported")
{
  auto d = read("name: a\nlink:\n  bandwidth: 1 furlong\n  latncy: 1us\ncount: 100\nextra: 1\n");
  REQUIRE(d.size() == 4);
  auto find = [&](const std::string& key) {
    for (const auto& x : d)
      if (x.key == key)
        return x;
    FAIL("no diagnostic for " << key);
    return Diagnostic{};
  };
  CHECK(find("link.bandwidth").line == 3);
  CHECK(find("link.latncy").line == 4);
  CHECK(find("link.latncy").message == "unknown key (did you mean 'latency'?)");
  CHECK(find("count").line == 5);
  CHECK(find("count").message.find("out of range") != std::string::npos);
  CHECK(find("extra").line == 6);
  CHECK(find("extra").to_string() == "in.yaml:6: extra: unknown key");
}

TEST_CASE("missing keys, wrong shapes and duplicates")
{
  auto d = read("link: [1, 2]\nname: a\nname: b\n");
  REQUIRE(d.size() == 2);
  CHECK(d[0].key == "name");
  CHECK(d[0].message == "duplicate key");
  CHECK(d[1].key == "link");
  CHECK(d[1].message.find("mapping") != std::string::npos);
  auto m = read("count: 2\n");
  REQUIRE(m.size() == 1);
  CHECK(m[0].key == "name");
  CHECK(m[0].message == "missing required key");
}

TEST_CASE("syntax errors carry the line")
{
  try {
    load_yaml_string("name: a\nlink: {bandwidth: 1\n", "bad.yaml");
    FAIL("no exception");
  } catch (const ConfigError& e) {
    REQUIRE(e.diagnostics().size() == 1);
    CHECK(e.diagnostics()[0].file == "bad.yaml");
    CHECK(e.diagnostics()[0].line >= 2);
  }
  CHECK_THROWS_AS(load_yaml_file("/nonexistent/file.yaml"), ConfigError);
}

TEST_CASE("overridden keys report their origin")
{
  Diagnostics diags("in.yaml");
  diags.set_origin("training.micro_batch", "--set training.micro_batch=x");
  diags.error_at_line(7, "training.micro_batch", "not an integer");
  diags.error_at_line(8, "training.global_batch", "bad");
  CHECK(diags.list()[0].to_string() == "--set training.micro_batch=x: training.micro_batch: not an integer");
  CHECK(diags.list()[1].to_string() == "in.yaml:8: training.global_batch: bad");
}
