#include "engine/memory_budget.h"

#include <limits>

#include "common/error.h"
#include "engine/sequence.h"

namespace mp {

MemoryBudget::MemoryBudget(size_t limit) : limit_(limit) {
  if (limit_ == 0) limit_ = available_memory_bytes();
  if (limit_ == 0) limit_ = std::numeric_limits<size_t>::max();
}

size_t MemoryBudget::reserved() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

MemoryReservation::MemoryReservation(std::shared_ptr<MemoryBudget> budget, const MemoryEstimate& est,
                                     const std::string& policy)
    : budget_(std::move(budget)), bytes_(est.total()) {
  check(budget_ != nullptr, "internal: memory reservation without a budget");
  std::lock_guard<std::mutex> lock(budget_->mu_);
  const size_t left = budget_->limit_ - budget_->reserved_;
  if (bytes_ > left) {
    const size_t others = budget_->reserved_;
    budget_.reset();
    std::string need = std::to_string(est.kv_bytes >> 20) + " MiB of KV cache";
    if (est.aux_bytes > 0)
      need += " + ~" + std::to_string(est.aux_bytes >> 20) + " MiB of " + policy + " attention structures";
    throw Error("a context of " + std::to_string(est.n_ctx) + " tokens needs " + need + " but only " +
                std::to_string(left >> 20) + " MiB of memory is left (" + std::to_string(others >> 20) +
                " MiB already reserved by other sequences of this run); lower n_ctx or the number of sequences");
  }
  budget_->reserved_ += bytes_;
}

MemoryReservation::MemoryReservation(MemoryReservation&& o) noexcept
    : budget_(std::move(o.budget_)), bytes_(o.bytes_) {
  o.bytes_ = 0;
}

MemoryReservation& MemoryReservation::operator=(MemoryReservation&& o) noexcept {
  if (this != &o) {
    release();
    budget_ = std::move(o.budget_);
    bytes_ = o.bytes_;
    o.bytes_ = 0;
  }
  return *this;
}

MemoryReservation::~MemoryReservation() { release(); }

void MemoryReservation::release() noexcept {
  if (!budget_) return;
  std::lock_guard<std::mutex> lock(budget_->mu_);
  budget_->reserved_ -= bytes_;
  budget_.reset();
  bytes_ = 0;
}

}  // namespace mp
