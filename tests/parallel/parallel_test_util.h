// Shared by the context-parallel tests (run under mpirun; see tests/CMakeLists.txt).
#pragma once
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/model.h"
#include "parallel/comm.h"

namespace mp::parallel::test {

extern Comm* g_comm;  // the job's communicator, made once in main (MPI cannot start twice)

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The in-repo model and a 475-token prompt from examples/.
inline const Model& default_model() {
  static std::unique_ptr<Model> m = Model::load(std::string(MAGICPIG_SOURCE_DIR) + "/models/default.gguf");
  return *m;
}
inline std::vector<int32_t> prompt_ids() {
  return default_model().tokenizer.encode(read_text(std::string(MAGICPIG_SOURCE_DIR) + "/examples/needle_512.txt"), true);
}

}  // namespace mp::parallel::test
