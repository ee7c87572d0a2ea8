// The page's policy selector is built from the registry, so every policy is offered.
#include <gtest/gtest.h>

#include <string>

#include "attention/registry.h"
#include "server/http_server.h"

namespace mp::server {
namespace {

TEST(WebPage, OffersEveryRegistryPolicy) {
  const std::string page = index_html();
  for (const attn::PolicyDesc& p : attn::policy_registry())
    EXPECT_NE(page.find("<option value=\"" + p.name + "\">" + p.name + "</option>"), std::string::npos) << p.name;
  EXPECT_NE(page.find("<option value=\"\">server default</option>"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace mp::server
