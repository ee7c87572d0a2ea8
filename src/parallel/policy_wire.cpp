#include "parallel/policy_wire.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "attention/registry.h"
#include "common/error.h"

namespace mp::parallel {

namespace {

template <class T>
void put(std::vector<char>& out, const T& v) {
  const char* p = reinterpret_cast<const char*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <class T>
T get(std::span<const char> in, size_t& pos) {
  check(pos + sizeof(T) <= in.size(), "context parallel: truncated policy configuration");
  T v;
  std::memcpy(&v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}

}  // namespace

void append_policy(const attn::Config& cfg, std::vector<char>& out) {
  put(out, uint32_t(cfg.name.size()));
  out.insert(out.end(), cfg.name.begin(), cfg.name.end());
  for (const attn::ParamDesc* p : attn::all_params()) {
    if (p->type == attn::ParamType::Fraction) put(out, p->get_real(cfg));
    else put(out, p->get_int(cfg));
  }
  put(out, uint8_t(cfg.insert_generated));
  put(out, uint8_t(cfg.dense_layers_set));
  put(out, uint32_t(cfg.dense_layers.size()));
  for (int l : cfg.dense_layers) put(out, int32_t(l));
  put(out, uint32_t(cfg.exact_heads.size()));
  for (const auto& [l, h] : cfg.exact_heads) put(out, int32_t(l)), put(out, int32_t(h));
}

attn::Config read_policy(std::span<const char> in, size_t& pos) {
  attn::Config cfg;
  const uint32_t n = get<uint32_t>(in, pos);
  check(pos + n <= in.size(), "context parallel: truncated policy configuration");
  cfg.name.assign(in.data() + pos, n);
  pos += n;
  for (const attn::ParamDesc* p : attn::all_params()) {
    if (p->type == attn::ParamType::Fraction) p->set_real(cfg, get<double>(in, pos));
    else p->set_int(cfg, get<int64_t>(in, pos));
  }
  cfg.insert_generated = get<uint8_t>(in, pos) != 0;
  cfg.dense_layers_set = get<uint8_t>(in, pos) != 0;
  const uint32_t n_dense = get<uint32_t>(in, pos);
  check(size_t(n_dense) * 4 <= in.size() - pos, "context parallel: truncated policy configuration");
  cfg.dense_layers.resize(n_dense);
  for (int& l : cfg.dense_layers) l = get<int32_t>(in, pos);
  const uint32_t n_exact = get<uint32_t>(in, pos);
  check(size_t(n_exact) * 8 <= in.size() - pos, "context parallel: truncated policy configuration");
  cfg.exact_heads.resize(n_exact);
  for (auto& [l, h] : cfg.exact_heads) l = get<int32_t>(in, pos), h = get<int32_t>(in, pos);
  return cfg;
}

}  // namespace mp::parallel
