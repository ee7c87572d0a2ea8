// The fixture most engine and eval tests start from: a small seeded random Llama written to a
// temporary GGUF file and loaded. A test suite derives from it and overrides spec() for
// another shape.
#pragma once
#include <gtest/gtest.h>

#include <memory>

#include "model/model.h"
#include "model/random_model.h"
#include "testutil/testutil.h"

namespace mp::test {

struct RandomModelFixture : ::testing::Test {
  TempDir dir;
  std::unique_ptr<Model> model;

  // 4 layers (magicpig's default dense layers {0, 2} leave 1 and 3 sparse), weights scaled up
  // so that attention is peaked enough for the policies to differ.
  virtual RandomModelSpec spec() const {
    RandomModelSpec s;
    s.n_layer = 4;
    s.n_ctx = 512;
    s.weight_scale = 2.0f;
    return s;
  }
  void SetUp() override {
    write_random_model(spec(), dir.file("m.gguf"));
    model = Model::load(dir.file("m.gguf"));
  }
};

}  // namespace mp::test
