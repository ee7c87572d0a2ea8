// Placeholder until the suite lands; replaced by its implementation.
#include "common.h"
#include "common/error.h"

namespace mp::cli {

int cmd_eval_attention_error(int, char**) { throw Error("eval suite not built yet"); }

}  // namespace mp::cli
