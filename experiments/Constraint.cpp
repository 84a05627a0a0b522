#include "experiments/Constraint.hpp"

#include "common/Suggest.hpp"

#include <cctype>
#include <cmath>
#include <stdexcept>

namespace ddlsim::experiments {

const std::vector<std::pair<std::string, std::string>>& constraint_variables()
{
  static const std::vector<std::pair<std::string, std::string>> variables{
      {"pp", "pipeline stages"},
      {"dp", "data-parallel replicas (after dp: auto)"},
      {"tp", "tensor-parallel size"},
      {"cp", "context-parallel size"},
      {"zero", "ZeRO stage (0-3)"},
      {"zero_group", "GPUs of a ZeRO shard group as given (0: dp x cp)"},
      {"ep", "expert-parallel size (mixtures of experts)"},
      {"sequence_parallel", "1 with Megatron sequence parallelism, else 0"},
      {"seq", "tokens per sample (the model's, or training.seq)"},
      {"gpus", "GPUs of the cluster"},
      {"nodes", "nodes of the cluster"},
      {"gpus_per_node", "GPUs per node"},
      {"micro_batch", "samples per micro-batch"},
      {"global_batch", "samples per iteration"},
      {"num_micro_batches", "global_batch / (micro_batch x dp)"},
      {"virtual_stages", "model chunks per GPU"},
  };
  return variables;
}

struct Constraint::Node {
  enum class Kind { number, name, unary, binary };
  Kind kind = Kind::number;
  double value = 0;
  std::string name;  // name, or the operator
  std::unique_ptr<Node> left, right;
};

namespace {

using Node = std::unique_ptr<Constraint::Node>;

class Parser {
public:
  explicit Parser(const std::string& text) : text_(text) {}

  Node parse()
  {
    Node n = binary(0);
    skip();
    if (pos_ < text_.size())
      fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return n;
  }

private:
  // Binary operators by precedence level, lowest first.
  static constexpr const char* levels[][6] = {
      {"||", "or", nullptr}, {"&&", "and", nullptr}, {"==", "!=", nullptr}, {"<=", ">=", "<", ">", nullptr},
      {"+", "-", nullptr},   {"*", "/", "%", nullptr}};
  static constexpr int level_count = 6;

  [[noreturn]] void fail(const std::string& what) const
  {
    throw std::invalid_argument("at character " + std::to_string(pos_ + 1) + ": " + what);
  }
  void skip()
  {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  // Consumes operator `op` if it comes next (a word operator only as a whole word).
  bool take(const std::string& op)
  {
    skip();
    if (text_.compare(pos_, op.size(), op) != 0)
      return false;
    const bool word = std::isalpha(static_cast<unsigned char>(op[0]));
    const std::size_t end = pos_ + op.size();
    if (word && end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_'))
      return false;
    if (op == "<" || op == ">" || op == "!")  // not the first character of <=, >=, !=
      if (end < text_.size() && text_[end] == '=')
        return false;
    pos_ = end;
    return true;
  }
  Node make(Constraint::Node::Kind kind, std::string name, Node left, Node right)
  {
    auto n = std::make_unique<Constraint::Node>();
    n->kind = kind;
    n->name = std::move(name);
    n->left = std::move(left);
    n->right = std::move(right);
    return n;
  }
  Node binary(int level)
  {
    if (level == level_count)
      return unary();
    Node left = binary(level + 1);
    for (;;) {
      const char* found = nullptr;
      for (const char* const* op = levels[level]; *op; ++op)
        if (take(*op)) {
          found = *op;
          break;
        }
      if (!found)
        return left;
      std::string name = found;
      if (name == "or")
        name = "||";
      else if (name == "and")
        name = "&&";
      left = make(Constraint::Node::Kind::binary, name, std::move(left), binary(level + 1));
    }
  }
  Node unary()
  {
    if (take("!") || take("not"))
      return make(Constraint::Node::Kind::unary, "!", unary(), nullptr);
    if (take("-"))
      return make(Constraint::Node::Kind::unary, "-", unary(), nullptr);
    return primary();
  }
  Node primary()
  {
    skip();
    if (pos_ >= text_.size())
      fail("the expression ends too early");
    if (take("(")) {
      Node inner = binary(0);
      if (!take(")"))
        fail("expected ')'");
      return inner;
    }
    const char c = text_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      std::size_t used = 0;
      double v = 0;
      try {
        v = std::stod(text_.substr(pos_), &used);
      } catch (const std::exception&) {
        fail("not a number");
      }
      pos_ += used;
      auto n = std::make_unique<Constraint::Node>();
      n->value = v;
      return n;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = pos_;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      std::string name = text_.substr(start, pos_ - start);
      bool known = false;
      for (const auto& [v, help] : constraint_variables())
        known = known || v == name;
      if (!known) {
        std::string list;
        std::vector<std::string> names;
        for (const auto& [v, help] : constraint_variables()) {
          list += (list.empty() ? "" : ", ") + v;
          names.push_back(v);
        }
        pos_ = start;
        fail("unknown name '" + name + "'" + did_you_mean(name, names) + " (a constraint may use: " + list + ")");
      }
      return make(Constraint::Node::Kind::name, name, nullptr, nullptr);
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& text_;
  std::size_t pos_ = 0;
};

double evaluate(const Constraint::Node& n, const std::map<std::string, double>& values)
{
  switch (n.kind) {
  case Constraint::Node::Kind::number: return n.value;
  case Constraint::Node::Kind::name: {
    auto it = values.find(n.name);
    if (it == values.end())
      throw std::invalid_argument("no value for '" + n.name + "'");
    return it->second;
  }
  case Constraint::Node::Kind::unary: {
    const double v = evaluate(*n.left, values);
    return n.name == "!" ? (v == 0 ? 1.0 : 0.0) : -v;
  }
  case Constraint::Node::Kind::binary: break;
  }
  const std::string& op = n.name;
  const double a = evaluate(*n.left, values);
  if (op == "&&")
    return a != 0 && evaluate(*n.right, values) != 0 ? 1.0 : 0.0;
  if (op == "||")
    return a != 0 || evaluate(*n.right, values) != 0 ? 1.0 : 0.0;
  const double b = evaluate(*n.right, values);
  if (op == "+") return a + b;
  if (op == "-") return a - b;
  if (op == "*") return a * b;
  if ((op == "/" || op == "%") && b == 0)
    throw std::invalid_argument("division by zero");
  if (op == "/") return a / b;
  if (op == "%") return std::fmod(a, b);
  if (op == "==") return a == b ? 1.0 : 0.0;
  if (op == "!=") return a != b ? 1.0 : 0.0;
  if (op == "<") return a < b ? 1.0 : 0.0;
  if (op == "<=") return a <= b ? 1.0 : 0.0;
  if (op == ">") return a > b ? 1.0 : 0.0;
  return a >= b ? 1.0 : 0.0;  // ">="
}

}  // namespace

Constraint::Constraint(const std::string& text) : text_(text), root_(Parser(text_).parse()) {}
Constraint::~Constraint() = default;
Constraint::Constraint(Constraint&&) noexcept = default;
Constraint& Constraint::operator=(Constraint&&) noexcept = default;

bool Constraint::accepts(const std::map<std::string, double>& values) const { return evaluate(*root_, values) != 0; }

}  // namespace ddlsim::experiments
