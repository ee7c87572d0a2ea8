// magicpig: long-context Llama inference with MagicPIG LSH-sampled decode attention.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "common.h"
#include "common/error.h"

namespace {

void usage() {
  std::fputs(
      "usage: magicpig COMMAND [options]   (magicpig COMMAND --help for its options)\n\n"
      "commands:\n"
      "  run        generate text from a prompt (dense or sparse decode attention)\n"
      "  serve      OpenAI-compatible HTTP server with continuous batching\n"
      "  info       describe a GGUF model\n"
      "  devices    list the CUDA devices this build can use\n"
      "  tokenize   print the token ids of a text\n"
      "  convert    convert a llama2.c checkpoint to GGUF\n"
      "  bench      llama-bench-style speed tables per attention policy and depth\n"
      "  eval       quality per attention policy: ruler, attention-error, perplexity\n"
      "  calibrate  per-head diagnosis of magicpig on a model, and the profile that fixes its failing heads\n"
      "  random-model  write a random-weight GGUF of a given shape (for speed measurements)\n",
      stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help")) {
    usage();
    return argc < 2 ? 1 : 0;
  }
  const char* cmd = argv[1];
  try {
    if (!std::strcmp(cmd, "run")) return mp::cli::cmd_run(argc, argv);
    if (!std::strcmp(cmd, "serve")) return mp::cli::cmd_serve(argc, argv);
    if (!std::strcmp(cmd, "info")) return mp::cli::cmd_info(argc, argv);
    if (!std::strcmp(cmd, "devices")) return mp::cli::cmd_devices(argc, argv);
    if (!std::strcmp(cmd, "tokenize")) return mp::cli::cmd_tokenize(argc, argv);
    if (!std::strcmp(cmd, "convert")) return mp::cli::cmd_convert(argc, argv);
    if (!std::strcmp(cmd, "bench")) return mp::cli::cmd_bench(argc, argv);
    if (!std::strcmp(cmd, "random-model")) return mp::cli::cmd_random_model(argc, argv);
    if (!std::strcmp(cmd, "eval")) return mp::cli::cmd_eval(argc, argv);
    if (!std::strcmp(cmd, "calibrate")) return mp::cli::cmd_calibrate(argc, argv);
    std::fprintf(stderr, "error: unknown command '%s' (run 'magicpig --help')\n", cmd);
    return 1;
  } catch (const mp::Error& e) {
    std::fprintf(stderr, "error: %s\n", mp::cli::with_flag_names(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
