// magicpig eval SUITE: quality of the decode attention policies (docs/eval.md indexes the suites).
#include <cstdio>
#include <cstring>

#include "common.h"

namespace mp::cli {

int cmd_eval(int argc, char** argv) {
  static const char* kUsage =
      "usage: magicpig eval SUITE [options]   (magicpig eval SUITE --help)\n\n"
      "suites:\n"
      "  ruler            RULER-style long-context tasks, accuracy per policy\n"
      "  attention-error  relative L2 error of each policy's attention output vs exact\n"
      "  perplexity       teacher-forced perplexity and KL vs dense per policy\n";
  if (argc < 3) {
    std::fputs(kUsage, stderr);
    std::fputs("error: eval needs a suite (ruler, attention-error or perplexity)\n", stderr);
    return 1;
  }
  if (!std::strcmp(argv[2], "-h") || !std::strcmp(argv[2], "--help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  // Shift so each suite parses "magicpig eval-SUITE options..." like any other command.
  const char* suite = argv[2];
  if (!std::strcmp(suite, "ruler")) return cmd_eval_ruler(argc - 1, argv + 1);
  if (!std::strcmp(suite, "attention-error")) return cmd_eval_attention_error(argc - 1, argv + 1);
  if (!std::strcmp(suite, "perplexity")) return cmd_eval_perplexity(argc - 1, argv + 1);
  std::fprintf(stderr, "error: unknown eval suite '%s' (known: ruler, attention-error, perplexity)\n", suite);
  return 1;
}

}  // namespace mp::cli
