// Sweep constraints: `where: pp * dp * tp == 64` keeps only the points for which the expression holds.
//
// The expression has numbers, the names of a point's values (constraint_variables()), arithmetic
// (+ - * / %, unary -), comparisons (== != < <= > >=), logic (&& || !, or `and` `or` `not`) and
// parentheses, with C's precedence (`not` binds like `!`: write `not (dp > 2)`). A value is true
// when it is not zero.
//
//   Constraint c("pp * dp * tp == 64 && micro_batch <= 8");
//   bool keep = c.accepts({{"pp", 4}, {"dp", 8}, {"tp", 2}, {"micro_batch", 4}});
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ddlsim::experiments {

/// The names a constraint may use, with what each is.
const std::vector<std::pair<std::string, std::string>>& constraint_variables();

class Constraint {
public:
  /// Parses `text`. Throws std::invalid_argument ("at character N: ...") on a syntax error or a name
  /// that is not a constraint variable.
  explicit Constraint(const std::string& text);
  ~Constraint();
  Constraint(Constraint&&) noexcept;
  Constraint& operator=(Constraint&&) noexcept;

  /// True when the expression is not zero for these values. Throws std::invalid_argument when a
  /// name has no value, or on a division by zero.
  bool accepts(const std::map<std::string, double>& values) const;
  const std::string& text() const { return text_; }

  struct Node;  // the expression tree (defined in the .cpp)

private:
  std::string text_;
  std::unique_ptr<Node> root_;
};

}  // namespace ddlsim::experiments
