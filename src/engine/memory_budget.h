// Memory shared by several sequences of one process (a batch, the forks of an evaluation, a
// server's slots). A KV cache is reserved, not touched, when its sequence is made, so the OS's
// MemAvailable alone would let N sequences each believe they fit and the OOM killer would end
// the run later; a budget counts what its sequences have been promised instead.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

namespace mp {

struct MemoryEstimate;

class MemoryBudget {
 public:
  // limit 0: the memory available when the budget is made (MemAvailable; unlimited if unknown).
  explicit MemoryBudget(size_t limit = 0);
  size_t limit() const { return limit_; }
  size_t reserved() const;

 private:
  friend class MemoryReservation;
  mutable std::mutex mu_;
  size_t limit_;
  size_t reserved_ = 0;
};

// What one sequence holds of a budget; returned when it is destroyed. Move-only.
class MemoryReservation {
 public:
  MemoryReservation() = default;
  // Throws mp::Error naming the sizes when `est` does not fit in what the budget has left;
  // `policy` names the auxiliary structures in the message.
  MemoryReservation(std::shared_ptr<MemoryBudget> budget, const MemoryEstimate& est, const std::string& policy);
  MemoryReservation(MemoryReservation&& o) noexcept;
  MemoryReservation& operator=(MemoryReservation&& o) noexcept;
  MemoryReservation(const MemoryReservation&) = delete;
  MemoryReservation& operator=(const MemoryReservation&) = delete;
  ~MemoryReservation();
  size_t bytes() const { return bytes_; }

 private:
  void release() noexcept;
  std::shared_ptr<MemoryBudget> budget_;
  size_t bytes_ = 0;
};

}  // namespace mp
