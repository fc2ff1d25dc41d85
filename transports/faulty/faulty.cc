#include "transports/faulty/faulty.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <vector>

#include "src/core/clock.h"
#include "src/core/log.h"
#include "transports/decorator.h"

namespace tempo::transport::faulty {
namespace {

// One send the wire has accepted: waiting for its release time, then in flight.
struct Pending {
  Request* user = nullptr;
  int peer = 0;
  uint64_t tag = 0;
  const void* buf = nullptr;
  size_t len = 0;
  std::vector<std::byte> corrupted;  // the bytes that travel when corrupted
  std::vector<std::byte> duplicate;  // the second copy's bytes (the user may reuse theirs)
  int64_t releaseAt = 0;
  bool drop = false;
  int copies = 1;  // 2: duplicated; 0: dropped
  int posted = 0;  // copies posted so far
  bool userDone = false;  // the user's request is completed (by the first copy)
  Request inner[2];
};

class FaultyEndpoint final : public Decorator {
 public:
  FaultyEndpoint(std::unique_ptr<Endpoint> inner, const Faults& faults, int rank)
      : Decorator(std::move(inner), "faulty"),
        faults_(faults),
        rank_(rank),
        rng_(faults.seed * 0x9e3779b97f4a7c15ull ^ uint64_t(rank) * 0xbf58476d1ce4e5b9ull) {}

  ~FaultyEndpoint() override {
    inner_.reset();  // before the requests it may hold
    TEMPO_INFO(log::Net,
               "TEMPO_FAULT %s on rank %d: %lu sends, %lu corrupted, %lu dropped, %lu duplicated, %lu reordered",
               faults_.describe().c_str(), rank_, (unsigned long)counts_.sent, (unsigned long)counts_.corrupted,
               (unsigned long)counts_.dropped, (unsigned long)counts_.duplicated, (unsigned long)counts_.reordered);
  }

  const Counts& counts() const { return counts_; }

  // Accepts the send (the wire owns it now), decides its faults, and releases whatever is due.
  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override {
    Pending* p = take();
    p->user = req;
    p->peer = peer;
    p->tag = tag;
    p->buf = buf;
    p->len = len;
    ++counts_.sent;
    const int64_t now = nowNs();
    int64_t at = now + faults_.delayNs + (faults_.jitterNs > 0 ? int64_t(uniform() * double(faults_.jitterNs)) : 0);
    if (lastRelease_.size() <= size_t(peer)) lastRelease_.resize(size_t(peer) + 1, 0);
    at = std::max(at, lastRelease_[size_t(peer)]);  // first in, first out per peer
    if (chance(faults_.reorder)) {
      at += faults_.reorderNs;  // later messages to this peer go first
      ++counts_.reordered;
    } else {
      lastRelease_[size_t(peer)] = at;
    }
    p->releaseAt = at;
    if (chance(faults_.drop)) {
      p->drop = true;
      ++counts_.dropped;
    }
    if (chance(faults_.corrupt) && len > 0) {
      const auto* bytes = static_cast<const std::byte*>(buf);
      p->corrupted.assign(bytes, bytes + len);
      const uint64_t bit = rng_() % (uint64_t(len) * 8);
      p->corrupted[bit / 8] ^= std::byte(1u << (bit % 8));
      p->buf = p->corrupted.data();
      ++counts_.corrupted;
    }
    if (chance(faults_.dup)) {
      const auto* bytes = static_cast<const std::byte*>(p->buf);
      p->duplicate.assign(bytes, bytes + len);
      p->copies = 2;
      ++counts_.duplicated;
    }
    waiting_.push_back(p);
    release(now);
    return Status::Success;
  }

  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override {
    return inner_->irecv(peer, tag, buf, len, req);
  }

  // The user's send completes with its first copy; a duplicate, which may never be
  // received, is the wire's and is kept until its own copy completes.
  int progress() override {
    int completed = inner_->progress();
    release(nowNs());
    for (size_t i = 0; i < inFlight_.size();) {
      Pending* p = inFlight_[i];
      if (!p->userDone && (p->copies == 0 || p->inner[0].done)) {
        complete(p, p->copies == 0 ? Status::Success : p->inner[0].status);
        ++completed;
      }
      if (p->userDone && (p->copies < 2 || p->inner[1].done)) {
        free_.push_back(p);
        inFlight_[i] = inFlight_.back();
        inFlight_.pop_back();
      } else {
        ++i;
      }
    }
    return completed;
  }

  // Held messages need progress() calls to leave: never sleep past the next release.
  void wait(int64_t ns) override {
    if (!waiting_.empty()) ns = std::min<int64_t>(ns, 20 * 1000);
    inner_->wait(ns);
  }

  // Duplicates take a second inner request.
  int maxOutstanding() const override { return std::max(1, inner_->maxOutstanding() / 2); }

  void cancelAll() override {
    inner_->cancelAll();
    for (Pending* p : waiting_) free_.push_back(p);
    for (Pending* p : inFlight_) free_.push_back(p);
    waiting_.clear();
    inFlight_.clear();
  }

 private:
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  bool chance(double p) { return p > 0 && uniform() < p; }

  Pending* take() {
    if (free_.empty()) {
      pool_.push_back(std::make_unique<Pending>());
      free_.push_back(pool_.back().get());
    }
    Pending* p = free_.back();
    free_.pop_back();
    *p = Pending{};
    return p;
  }

  void complete(Pending* p, Status s) {
    p->user->bytes = p->len;
    p->user->status = s;
    p->user->done = true;
    p->userDone = true;
  }

  // Posts every due message, in acceptance order; the first one the inner endpoint refuses
  // (InProgress) ends the pass, so that nothing overtakes it but what reorder= allows.
  void release(int64_t now) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      Pending* p = *it;
      if (p->releaseAt > now) {
        ++it;
        continue;
      }
      if (p->drop) p->copies = 0;  // nothing travels; progress() completes it
      while (p->posted < p->copies) {
        Request& r = p->inner[p->posted];
        r.reset();
        const bool copy = p->posted == 1;
        r.region = p->corrupted.empty() && !copy ? p->user->region : nullptr;
        const Status s = inner_->isend(p->peer, p->tag, copy ? p->duplicate.data() : p->buf, p->len, &r);
        if (s == Status::InProgress) return;
        if (!ok(s)) {
          // A copy already posted still owns the buffer: report the failure, keep the rest.
          r.done = true;
          r.status = s;
        }
        ++p->posted;
      }
      inFlight_.push_back(p);
      it = waiting_.erase(it);
    }
  }

  Faults faults_;
  int rank_;
  std::mt19937_64 rng_;
  Counts counts_;
  std::vector<std::unique_ptr<Pending>> pool_;
  std::vector<Pending*> free_, inFlight_;
  std::deque<Pending*> waiting_;       // accepted, not yet (fully) posted
  std::vector<int64_t> lastRelease_;  // per peer: the latest in-order release time
};

Status parseNumber(std::string_view key, std::string_view text, double* out) {
  // from_chars for double is in libstdc++ 11+.
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(*out) || *out < 0)
    return fail(Status::InvalidArgument, "TEMPO_FAULT: '%.*s=%.*s' is not a non-negative number", int(key.size()),
                key.data(), int(text.size()), text.data());
  return Status::Success;
}

}  // namespace

std::string Faults::describe() const {
  std::string s;
  auto add = [&](const char* k, double v, double scale) {
    if (v <= 0) return;
    if (!s.empty()) s += ',';
    char buf[64];
    snprintf(buf, sizeof buf, "%s=%g", k, v / scale);
    s += buf;
  };
  add("corrupt", corrupt, 1);
  add("drop", drop, 1);
  add("dup", dup, 1);
  add("reorder", reorder, 1);
  add("delay", double(delayNs), 1000);
  add("jitter", double(jitterNs), 1000);
  return s.empty() ? "none" : s;
}

Result<Faults> parse(std::string_view spec) {
  Faults f;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos)
      return fail(Status::InvalidArgument, "TEMPO_FAULT: '%.*s' is not key=value", int(item.size()), item.data());
    const std::string_view key = item.substr(0, eq), text = item.substr(eq + 1);
    double v = 0;
    TEMPO_TRY(parseNumber(key, text, &v));
    double* probability = key == "corrupt" ? &f.corrupt
                          : key == "drop"  ? &f.drop
                          : key == "dup"   ? &f.dup
                          : key == "reorder" ? &f.reorder
                                             : nullptr;
    if (probability) {
      if (v > 1)
        return fail(Status::InvalidArgument, "TEMPO_FAULT: %.*s=%g is not a probability (0..1)", int(key.size()),
                    key.data(), v);
      *probability = v;
    } else if (key == "delay" || key == "jitter") {
      (key == "delay" ? f.delayNs : f.jitterNs) = int64_t(v * 1000);
    } else if (key == "seed") {
      f.seed = uint64_t(v);
    } else {
      return fail(Status::InvalidArgument,
                  "TEMPO_FAULT: unknown fault '%.*s' (known: corrupt, drop, dup, reorder, delay, jitter, seed)",
                  int(key.size()), key.data());
    }
  }
  return f;
}

std::unique_ptr<Endpoint> create(std::unique_ptr<Endpoint> inner, const Faults& faults, int rank) {
  return std::make_unique<FaultyEndpoint>(std::move(inner), faults, rank);
}

Counts countsOf(const Endpoint& ep) {
  const auto* f = dynamic_cast<const FaultyEndpoint*>(&ep);
  return f ? f->counts() : Counts{};
}

}  // namespace tempo::transport::faulty
