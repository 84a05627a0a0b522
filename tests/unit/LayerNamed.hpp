// Test helper: the index of a model's layer by name (fails the test case when there is none).
#pragma once

#include "models/Model.hpp"

#include <doctest/doctest.h>

#include <string>

inline std::size_t layer_named(const ddlsim::models::Model& m, const std::string& name)
{
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m.layers()[i].name == name)
      return i;
  FAIL("no layer " << name);
  return 0;
}
